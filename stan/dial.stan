/**
 * DIAL in the computational chart: weighted order-effect BTL likelihoods of
 * LLM judges and people on a shared low-rank score space, with optional
 * Davidson-Beaver or Rao-Kupper ties (paired_likelihoods.stan).
 *
 * Model (paper Sec. 3-5 and App. "Reduced score-space representation").
 *   LLM cell (k, i, j, a), eq. binomial-model-llm:
 *     eta = S[k, i] - S[k, j] + a b_k,   wins_i ~ Binomial(wins_i + wins_j, inv_logit(eta))
 *   human cell (i, j), eq. binomial-model-human: eta = s_H[i] - s_H[j]
 *   response covariates (n_cov > 0): eta += z' beta_g, z the cell's comparison
 *   covariates, beta_g the effects of its group (row beta_row[g] of beta: one
 *   per judge or one shared by the judges, and the people's); the scores
 *   are then the style-controlled scores (z = 0)
 *   ties (ties > 0): a tie parameter nu_k per LLM judge and nu_H for
 *   people, see paired_likelihoods.stan; a group with nu_zero = 1 (no ties:
 *   the boundary MLE nu = 0) has binary cells and its log_nu entry is unused
 *   (schema_tdata.stan; point fits only: its log_nu is then flat).
 *   structure (eq. overparam with the computational restriction):
 *     S = A B'            A: K x (r + 1), A' 1 = K e_1
 *                         B: N x (r + 1), B' 1 = 0
 *     s_H = alpha B e_1   consensus calibration, M = mu   (calibration = 1)
 *     s_H = B c           full-space calibration, M = W   (calibration = 2)
 *   Because A' 1 = K e_1, B e_1 = S' 1 / K is the mean judge score, i.e. the
 *   consensus direction mu up to the scale 1' gamma / K.
 *
 * Target (eq. weighted-loss, weighted-joint-estimator): with a weight per cell
 * given as data, target = sum_cells w_c log p(counts_c) + log prior, where
 * log p includes the multinomial coefficient (as in every pydial program).
 * Up to that constant, cell_w = lambda n_H / n_LLM and human_w = 1 give
 * -n_H Q_lambda (pydial.model.likelihood.Objective); human_w = 0 is the LLM-only
 * stage of eq. staged-calibrated-estimator; a zero weight leaves a cell out.
 *
 * Parameters are the reduced chart theta of pydial.model.Chart, in the same
 * order, all unconstrained, so Stan's unconstrained vector IS theta
 * (followed by log_nu when ties > 0):
 *   A_free = rows 1..K-1 of A, row-major;  A[K] = K e_1 - sum of the others
 *   B_free = rows 1..N-1 of B, row-major;  B[N] = - sum of the others
 *   c      = alpha (calibration = 1), c (calibration = 2), empty (0)
 *   b      = order effects (order = 1), empty (0)
 *   beta_free = covariate effects, row-major (rows 1..n_beta of beta, n_cov each),
 *            the entries not fixed at 0 (beta_fixed) only
 *   log_nu = log tie parameters: LLM judges 1..K, then people (if H > 0)
 * fix_llm = 1 makes A, B data (A_fix, B_fix) and drops b and the judges' tie
 * parameters: only the calibration (and nu_H) is fitted, the second stage of
 * eq. staged-calibrated-estimator (pass C = 0; with covariates beta_row
 * gives the people row 1 and the judges 0: beta is then beta_H).
 * The chart keeps the gauge B -> B G, A -> A G^{-T} with G e_1 = e_1 (eq.
 * gauge), r (r + 1) flat directions: this program is for the log density and
 * the penalized MLE (optimizer), not for NUTS (see dial_sample.stan).
 *
 * Priors (penalty) are switched on by data: prior_<block>_sd > 0 adds an
 * independent normal(0, prior_<block>_sd) term on that block (log_nu: mean
 * prior_log_nu_mean); 0 = flat.  A ridge on the chart coordinates is not
 * gauge invariant; with all scales 0 the MLE is.
 *
 * Jeffreys prior (Firth 1993, data firth, codes as in firth.stan):
 *   1 = each judge's BTL: allowed where the LLM cells are one binomial GLM
 *       (K = 1, r = 0: the pooled BTL), design (D T_N, a) in (B_free, b);
 *   2 = the human block: the calibration GLM of the human cells, design
 *       X = [D_H M, Z_H] with M = B[, 1:d], with the basis normalized,
 *       1/2 [log det(X' W X) - log det(M' M)] (gauge invariant; for the
 *       calibration stage, with B held fixed, the Firth penalty of c).
 *   With ties > 0 the same GLMs of the tie family, with the free log nu
 *   (tie_firth_penalty).
 *
 * Layout.  Every block includes the shared pieces (schema_*.stan: the data
 * and its checks; cell_*.stan: the cell likelihood) and this program's own
 * (dial_*.stan), all in stan/include.  The cell likelihood is written once:
 * cell_inputs.stan gives eta and log nu per cell, cell_target.stan adds the
 * weighted log p(counts), cell_outputs.stan writes log_lik and counts_rep.
 *
 * How to extend (add, do not copy; README "Extending a Stan program").
 * Write a program with these blocks and #include lines and add: data after
 * `#include dial_data.stan` (pass it with pydial.stan.standata(...,
 * extra={...})), parameters after `#include dial_parameters.stan` (the
 * unconstrained vector is then theta, log_nu, then yours), their priors after
 * `#include dial_model.stan`, functions in `functions { }`, and an offset to
 * eta or log_nu_cell after each `#include cell_inputs.stan` (model block and
 * generated quantities alike).  Compile it with
 * pydial.stan.compile_model("my.stan") for log_prob / optimize.
 */
functions {
#include paired_likelihoods.stan
#include firth.stan
}
data {
#include schema_data.stan
#include dial_data.stan
}
transformed data {
#include schema_tdata.stan
#include dial_tdata.stan
}
parameters {
#include dial_parameters.stan
}
transformed parameters {
#include dial_tparameters.stan
}
model {
#include cell_inputs.stan
#include cell_target.stan
#include dial_model.stan
}
generated quantities {
  vector[calc_log_lik ? n_cells : 0] log_lik;            // log p(counts) per cell (LLM cells, then human)
  array[calc_log_lik ? n_cells : 0, 3] int counts_rep;   // replicated counts per cell (posterior predictive)
  if (calc_log_lik) {
#include cell_inputs.stan
#include cell_outputs.stan
  }
}
