/**
 * DIAL for NUTS: the structured order-effect BTL model of LLM judges and
 * people in an identified parameterization, with optional Davidson-Beaver
 * or Rao-Kupper ties.
 *
 * Model (paper Sec. 3-5).
 *   structure, Cond. llm-structure (eq. S-llm):
 *     S = gamma mu' + U V',   1' mu = 0, N^{-1} ||mu||^2 = 1, V' 1 = 0,
 *                             mu' V = 0, N^{-1} V' V = I_r, 1' U = 0,
 *                             1' gamma > 0
 *   human score, eq. human-subspace-model:
 *     s_H = c mu            (calibration = 1, M = mu)
 *     s_H = [mu, V] c       (calibration = 2, M = W)
 *   LLM cell (k, i, j, a), eq. binomial-model-llm:
 *     wins_i ~ Binomial(wins_i + wins_j, inv_logit(S[k, i] - S[k, j] + a b_k))
 *   human cell (i, j), eq. binomial-model-human:
 *     wins_i ~ Binomial(wins_i + wins_j, inv_logit(s_H[i] - s_H[j]))
 *   response covariates (n_cov > 0): eta += z' beta_g for a cell of group g
 *     (row beta_row[g] of beta: per judge or shared by the judges, and the
 *     people's); S and s_H are the style-controlled scores (z = 0)
 *   ties (ties > 0, data): a tie parameter nu_k per LLM judge and nu_H
 *     for people, Davidson-Beaver (1) or Rao-Kupper (2), see
 *     paired_likelihoods.stan; the human cells have no order effect (a = 0).
 *   weights: each cell's log-likelihood is multiplied by a data weight, so
 *     cell_w = lambda n_H / n_LLM, human_w = 1 is the power posterior whose
 *     log-likelihood is -n_H Q_lambda (eq. weighted-loss); all weights 1 is
 *     the ordinary posterior (lambda = n_LLM / n_H).
 *
 * Identified parameterization (the chart of dial.stan has flat gauge
 * directions, eq. gauge, that NUTS cannot explore):
 *   m     = Q_N m_raw, the mean judge score S' 1 / K = gamma_bar mu, with
 *           Q_N the Helmert basis of the centered subspace.  It is pinned
 *           down directly by the LLM data, so its posterior is close to
 *           normal in these Cartesian coordinates.  Then
 *           gamma_bar = 1' gamma / K = ||m|| / sqrt(N) (the consensus scale)
 *           and mu = m / gamma_bar.  1' gamma > 0 holds by construction, and
 *           the normal prior on m_raw gives gamma_bar a scaled chi_{N-1}
 *           prior, P(gamma_bar < eps) of order eps^{N-1}: the consensus scale
 *           is kept away from 0.  (The trap this avoids: with 1' gamma only
 *           bounded below by 0 the posterior drifted to 1' gamma -> 0, where
 *           S' 1 = 0 and mu stops being the LLM consensus.)  Diagnostics in
 *           the output: consensus_scale = gamma_bar and
 *           consensus_strength = ||S' 1|| / (sqrt(K) ||S||_F) in [0, 1].
 *   gamma = gamma_bar 1 + Q_K gamma_dev (deviations sum to zero).
 *   U V'  = P Z'.  The item side Z (N x r, Z' 1 = 0, Z' mu = 0) carries the
 *           scale and has Cartesian coordinates Z_raw ((N - 2) x r) in an
 *           orthonormal basis of {1, mu}^perp that moves with mu: the basis
 *           of e^perp (e = mu_ref, a reference direction given as data)
 *           reflected by the Householder map taking e to -mu_dir.  The map is
 *           smooth except at mu_dir = -e, far from the posterior when mu_ref
 *           is a rough estimate of mu (pydial passes its least-squares
 *           start).  The judge side P = Q_K frame(P_raw) is an orthonormal
 *           frame orthogonal to 1 (frame = Gram-Schmidt, see bases.stan);
 *           P_raw is a parameter expansion whose density depends on
 *           P_raw' P_raw only, exp(-||P_raw' P_raw - I||^2 / (2 * 0.2^2)),
 *           so P is uniform while the length of P_raw stays near 1 (a
 *           near-constant posterior scale for NUTS).  The usual normalization
 *           is reported: V = sqrt(N) frame(Z) (so N^{-1} V' V = I) and
 *           U = P Z' V / N (so U V' = P Z' and 1' U = 0).
 * U and V are identified only up to a common rotation (U V' = U Q (V Q)'),
 * and c_V rotates with V; s_H, S, mu, gamma, b and nu are identified and are
 * the quantities to summarize.  For r = 1 the rotation is a sign flip that
 * a chain does not cross; it does not affect the identified quantities.
 *
 * Priors (data; scale 0 = flat where the likelihood identifies the block):
 *   m_raw         ~ normal(0, prior_m_sd)   (mean judge score)
 *   gamma_dev     ~ normal(0, prior_gamma_sd)
 *   Z_raw         ~ normal(0, prior_Z_sd)   (item side of U V')
 *   b             ~ normal(0, prior_b_sd)
 *   beta          ~ normal(0, prior_beta_sd)
 *   c             ~ normal(0, prior_c_sd)
 *   log_nu        ~ normal(prior_log_nu_mean, prior_log_nu_sd)
 *   P_raw         density exp(-||P_raw' P_raw - I||^2 / 0.08)   (fixed; uniform P)
 * pydial.stan.posterior documents the defaults it passes.
 *
 * Human win probabilities (calc_win_prob = 1): win_prob[i, j] is the
 * probability that people prefer item i to item j in one comparison, the
 * family's P(i wins) at eta = s_H[i] - s_H[j] with the people's nu
 * (paired_win_prob): inv_logit(eta) for binary cells, e^{eta/2} /
 * (e^{eta/2} + e^{-eta/2} + nu) for Davidson, inv_logit(eta - nu) for
 * Rao-Kupper.  A tie is not a win: win_prob[i, j] + win_prob[j, i] =
 * 1 - P(tie).
 *
 * Layout.  Every block includes the shared pieces (schema_*.stan: the data
 * and its checks; cell_*.stan: the cell likelihood) and this program's own
 * (dial_sample_*.stan), all in stan/include.
 *
 * How to extend (add, do not copy; README "Extending a Stan program").
 * Write a program with these blocks and #include lines and add: data after
 * `#include dial_sample_data.stan` (pass it with pydial.posterior(...,
 * extra={...})), parameters after `#include dial_sample_parameters.stan`,
 * their priors after `#include dial_sample_model.stan`, functions in
 * `functions { }`, and an offset to eta or log_nu_cell after each
 * `#include cell_inputs.stan` (model block and generated quantities alike).
 * Sample it with pydial.posterior(data, "dial-ada", program="my.stan").  Keep the
 * identified parameterization (m_raw, gamma_dev, Z_raw, P_raw): it keeps the
 * consensus scale away from 0 (above).
 */
functions {
#include bases.stan
#include paired_likelihoods.stan
}
data {
#include schema_data.stan
#include dial_sample_data.stan
}
transformed data {
#include schema_tdata.stan
#include dial_sample_tdata.stan
}
parameters {
#include dial_sample_parameters.stan
}
transformed parameters {
#include dial_sample_tparameters.stan
}
model {
#include cell_inputs.stan
#include cell_target.stan
#include dial_sample_model.stan
}
generated quantities {
#include dial_sample_generated.stan
  vector[calc_log_lik ? n_cells : 0] log_lik;            // log p(counts) per cell (LLM cells, then human)
  array[calc_log_lik ? n_cells : 0, 3] int counts_rep;   // replicated counts per cell (posterior predictive)
  if (calc_log_lik) {
#include cell_inputs.stan
#include cell_outputs.stan
  }
}
