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
 *           P_raw' P_raw only, exp(-||P_raw' P_raw - I||^2 / (2 frame_sd^2)),
 *           so P is uniform (for every frame_sd) while the length of P_raw
 *           stays near 1.  frame_sd (data) only sets the scale of the
 *           directions that change P_raw' P_raw: pydial matches it to the
 *           posterior scale of the frame's own directions (twice their sd
 *           at the mode), so that NUTS sees one scale in P_raw instead of
 *           a radial scale up to 30 times the angular one.  The usual normalization
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
 *   P_raw         density exp(-||P_raw' P_raw - I||^2 / (2 frame_sd^2))   (uniform P)
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
 * Parameters: m_raw, gamma_dev, Z_raw, P_raw (the structure), b, beta_free,
 * c and log_nu; every quantity of the model (mu, gamma, U, V, S, s_H, beta)
 * is a transformed parameter.  Another parameterization of the structure
 * changes the parameters block, the priors on it and the first half of the
 * transformed parameters (up to S), nothing else.
 *
 * Extending: copy this program (pydial.stan.program_code("dial_sample")),
 * add data, parameters, their priors and an offset to eta or log_nu_cell
 * where they are computed (model block and generated quantities alike), and
 * sample it with pydial.posterior(data, "dial-ada", program="my.stan",
 * extra={...}).  Keep the identified parameterization (m_raw, gamma_dev,
 * Z_raw, P_raw): it keeps the consensus scale away from 0 (above).
 */
functions {
#include bases.stan
#include paired_likelihoods.stan
}
data {
  // ---- the cells, as every pydial program reads them (pydial.stan.standata)
  int<lower=2> N;                                    // number of items
  int<lower=0> K;                                    // number of LLM judges
  int<lower=0, upper=1> order;                       // 1 = order effects b_k (Python order=True); 0 = b = 0 (DIAL-noPos)
  int<lower=0, upper=2> ties;                        // outcome family (Python ties=): 0 binary, 1 Davidson-Beaver, 2 Rao-Kupper

  int<lower=0> C;                                    // number of LLM cells (k, i, j, a)
  array[C] int<lower=1, upper=K> cell_judge;         // judge k of the cell
  array[C] int<lower=1, upper=N> cell_i;             // canonical item i (i < j)
  array[C] int<lower=1, upper=N> cell_j;             // canonical item j
  array[C] int<lower=-1, upper=1> cell_a;            // display order: +1 if item i shown first, -1 if second
  array[C, 3] int<lower=0> cell_counts;              // (wins of item i, wins of item j, ties)
  vector<lower=0>[C] cell_w;                         // weight of the cell's log-likelihood (lambda n_H / n_LLM for lambda_=)

  int<lower=0> H;                                    // number of human cells (i, j)
  array[H] int<lower=1, upper=N> human_i;            // canonical item i (i < j)
  array[H] int<lower=1, upper=N> human_j;            // canonical item j
  array[H, 3] int<lower=0> human_counts;             // (wins of item i, wins of item j, ties)
  vector<lower=0>[H] human_w;                        // weight of the cell's log-likelihood

  int<lower=0> n_cov;                                // number of response covariates (Python data.p; 0 = none)
  matrix[C, n_cov] cell_z;                           // covariates of each LLM cell, item i against item j (as eta)
  matrix[H, n_cov] human_z;                          // covariates of each human cell
  array[K + 1] int<lower=0> beta_row;                // row of beta of each group (judges 1..K, people K + 1); 0 = none
  int<lower=0> n_beta;                               // rows of beta (max of beta_row; 0 when n_cov = 0)
  array[n_beta, n_cov] int<lower=0, upper=1> beta_fixed;  // 1 = the entry is fixed at 0 (its covariate is 0 on the row's cells)
  array[K + 1] int<lower=0, upper=1> nu_zero;        // 1 = the group (judges 1..K, then the people) has nu = 0: binary cells
  int<lower=0, upper=1> calc_log_lik;                // 1 = write log_lik and counts_rep per cell (LLM cells, then human)
  // ---- this program's own data (pydial.stan.schema.dial_sample_data)
  int<lower=0> rank;                                 // disagreement rank r (Python rank=); S has rank r + 1
  int<lower=0, upper=2> calibration;                 // 0 = no human block; 1 = M = mu; 2 = M = W
  vector[N - 1] mu_ref;                              // reference direction for mu (coordinates of Q_N), nonzero
  real<lower=0> prior_m_sd;                          // prior sd of the mean judge score m_raw (0 = flat)
  real<lower=0> prior_gamma_sd;                      // prior sd of gamma's deviations from its mean (0 = flat)
  real<lower=0> prior_Z_sd;                          // prior sd of Z_raw, the item side of U V' (0 = flat)
  real<lower=0> prior_b_sd;                          // prior sd of the order effects (0 = flat)
  real<lower=0> prior_beta_sd;                       // prior sd of the covariate effects (0 = flat)
  real<lower=0> prior_c_sd;                          // prior sd of the calibration coordinates (0 = flat)
  real prior_log_nu_mean;                            // prior mean of the log tie parameters
  real<lower=0> prior_log_nu_sd;                     // prior sd of the log tie parameters (0 = flat)
  real<lower=0> frame_sd;                            // scale of the parameter expansion of P (P is uniform for any value)
  int<lower=0, upper=1> calc_win_prob;               // 1 = write the N x N human win probabilities
}
transformed data {
  // ---- every cell once, LLM cells then human cells (the order of log_lik); the people are group K + 1
  int n_cells = C + H;
  array[n_cells] int all_judge = append_array(cell_judge, rep_array(K + 1, H));
  array[n_cells] int all_i = append_array(cell_i, human_i);
  array[n_cells] int all_j = append_array(cell_j, human_j);
  array[n_cells] int all_a = append_array(cell_a, rep_array(0, H));   // people: no order effect
  // the design X of eta = X (to_vector([S; s_H']), b), sparse (paired_design)
  tuple(vector[3 * n_cells], array[3 * n_cells] int, array[n_cells + 1] int) X
    = paired_design(K + 1, N, all_judge, all_i, all_j, all_a, order ? K : 0);
  array[n_cells, 3] int all_counts = append_array(cell_counts, human_counts);
  vector[n_cells] all_w = append_row(cell_w, human_w);
  vector[n_cells] all_log_coef = paired_log_coef(all_counts);
  matrix[n_cells, 3] all_w_counts = diag_pre_multiply(all_w, to_matrix(all_counts));   // the target's weighted counts
  real all_w_log_coef = dot_product(all_w, all_log_coef);
  check_tie_counts(all_counts, all_judge, ties, nu_zero);
  // covariates (n_cov > 0): cell t adds z' beta[all_beta_row[t]] to eta; beta_free holds the entries
  // of beta not fixed at 0, row-major (beta_pos: their position, 0 = fixed)
  if (n_beta != (n_cov == 0 ? 0 : max(beta_row))) reject("n_beta = ", n_beta, " must be max(beta_row) (0 when n_cov = 0)");
  array[n_beta, n_cov] int beta_pos = free_positions(beta_fixed, n_cov);
  int n_beta_free = n_beta * n_cov - sum(to_array_1d(beta_fixed));
  matrix[n_cells, n_cov] all_z = append_row(cell_z, human_z);
  array[n_cells] int all_beta_row = cell_beta_rows(beta_row, all_judge, n_cov);
  // tie parameters (ties > 0): log_nu[k] of LLM judge k, then the people's (when H > 0)
  int n_nu = ties == 0 ? 0 : K + (H > 0);
  array[K + 1] int nu_index = tie_index(n_nu, H, nu_zero);
  // ---- sizes, bases and checks
  int q = rank + 1;                                  // rank of S
  if (N < 3 || K < 1) reject("dial_sample.stan needs N >= 3 items and K >= 1 judges");
  int d = calibration == 0 ? 0 : (calibration == 1 ? 1 : q);   // calibration dimension
  // Q_N (N x (N - 1)), the Helmert basis of {x : 1' x = 0} in R^N, is applied by centered_times
  matrix[K, K - 1] Q_K = centered_basis(K);          // the same basis in R^K
  if (rank > K - 1 || q > N - 1) {
    reject("rank r = ", rank, " needs r <= K - 1 = ", K - 1, " and r + 1 <= N - 1 = ", N - 1,
           " (r is the disagreement rank of the structured LLM model)");
  }
  if (calibration == 0 && H > 0) {
    reject("human cells need a calibration basis (calibration = 1 or 2)");
  }
  // E_perp, an orthonormal basis of e^perp in R^{N-1} (e = mu_ref / ||mu_ref||): columns 2.. of the
  // Householder reflection I - h_ref w_ref w_ref', w_ref = e_1 - e, which takes the first unit vector
  // to e; so E_perp z = (0, z) - h_ref w_ref (w_ref[2:]' z)
  vector[N - 1] e_ref = mu_ref / sqrt(dot_self(mu_ref));
  vector[N - 1] w_ref = -e_ref;
  w_ref[1] += 1;
  real h_ref = dot_self(w_ref) > 1e-24 ? 2 / dot_self(w_ref) : 0;
}
parameters {
  vector[N - 1] m_raw;                               // mean judge score S' 1 / K in the coordinates of Q_N
  matrix[N - 2, rank] Z_raw;                         // item side of U V' (coordinates of {1, mu}^perp)
  vector[K - 1] gamma_dev;                           // deviations of gamma from its mean (coordinates of Q_K)
  matrix[K - 1, rank] P_raw;                         // judge side of U V', parameter expansion (coordinates of Q_K)
  vector[order ? K : 0] b;                           // order effects b_k
  vector[n_beta_free] beta_free;                     // covariate effects not fixed at 0, row-major
  vector[d] c;                                       // human calibration coordinates relative to M
  vector[n_nu] log_nu;                               // log tie parameters (judges 1..K, then the people)
}
transformed parameters {
  real consensus_scale = sqrt(dot_self(m_raw) / N); // gamma_bar = 1' gamma / K > 0
  vector[N] mu = col(centered_times(to_matrix(m_raw)), 1) / consensus_scale;   // consensus direction Q_N m_raw / gamma_bar, 1' mu = 0, ||mu||^2 = N
  vector[K] gamma = consensus_scale + Q_K * gamma_dev;   // consensus loadings, 1' gamma > 0
  matrix[N, rank] V;                                 // disagreement directions, V' [1, mu] = 0, V' V = N I
  matrix[K, rank] U;                                 // disagreement loadings, 1' U = 0
  matrix[K, N] S;                                    // judge scores, eq. S-llm
  vector[N] s_H = rep_vector(0, N);                  // calibrated human score, eq. human-subspace-model
  {
    vector[N - 1] mu_dir = m_raw / sqrt(dot_self(m_raw));
    vector[N - 1] w = e_ref + mu_dir;                // Householder vector: e_ref -> -mu_dir
    matrix[N - 1, rank] Y = append_row(rep_matrix(0, 1, rank), Z_raw) - w_ref * (h_ref * w_ref[2:(N - 1)]' * Z_raw);   // E_perp Z_raw, orthogonal to e_ref
    matrix[N - 1, rank] Zc = Y - (2 / dot_self(w)) * w * (w' * Y);   // orthogonal to mu_dir
    matrix[K, rank] P = Q_K * orthonormal_frame(P_raw);
    matrix[N, rank] Z = centered_times(Zc);                      // Q_N Zc
    V = sqrt(N) * centered_times(orthonormal_frame(Zc));         // sqrt(N) Q_N frame(Zc)
    U = P * (Z' * V) / N;
    S = gamma * mu' + P * Z';
  }
  if (calibration == 1) {
    s_H = c[1] * mu;
  } else if (calibration == 2) {
    s_H = append_col(mu, V) * c;
  }
  array[n_beta] vector[n_cov] beta = beta_rows(beta_free, beta_pos, n_cov);   // covariate effects, 0 where fixed
}
model {
  // every cell's linear predictor and log tie parameter; the people are row K + 1 of the scores
  vector[n_cells] eta = paired_eta(append_row(S, s_H'), b, X);
  if (n_cov > 0) eta += paired_offset(all_z, beta, all_beta_row);
  vector[ties > 0 ? n_cells : 0] log_nu_cell;        // none in the binary family (paired_target ignores it)
  if (ties > 0) log_nu_cell = paired_log_nu(log_nu, nu_index, all_judge);
  target += paired_target(all_w_counts, all_w_log_coef, eta, ties, log_nu_cell);
  // priors; scale 0 = flat.  Parameter expansion of P: a density of P_raw' P_raw only (uniform frame P)
  target += -0.5 * sum(square(crossprod(P_raw) - identity_matrix(rank))) / square(frame_sd);
  if (prior_m_sd > 0) target += normal_lpdf(m_raw | 0, prior_m_sd);
  if (prior_gamma_sd > 0) target += normal_lpdf(gamma_dev | 0, prior_gamma_sd);
  if (prior_Z_sd > 0) target += normal_lpdf(to_vector(Z_raw) | 0, prior_Z_sd);
  if (prior_b_sd > 0) target += normal_lpdf(b | 0, prior_b_sd);
  if (prior_beta_sd > 0) target += normal_lpdf(beta_free | 0, prior_beta_sd);
  if (prior_c_sd > 0) target += normal_lpdf(c | 0, prior_c_sd);
  if (prior_log_nu_sd > 0) target += normal_lpdf(log_nu | prior_log_nu_mean, prior_log_nu_sd);
}
generated quantities {
  real consensus_strength                            // ||S' 1|| / (sqrt(K) ||S||_F), in [0, 1]
    = sqrt(dot_self(S' * rep_vector(1, K))) / sqrt(K * sum(square(S)));
  vector[n_nu] nu = exp(log_nu);                     // tie parameters
  // P(people prefer i to j): the family's P(i wins) at eta = s_H[i] - s_H[j] (paired_win_prob)
  matrix[calc_win_prob ? N : 0, calc_win_prob ? N : 0] win_prob;
  if (calc_win_prob) win_prob = paired_win_prob(s_H, ties, paired_log_nu(log_nu, nu_index, {K + 1})[1]);
  vector[calc_log_lik ? n_cells : 0] log_lik;            // log p(counts) per cell (LLM cells, then human)
  array[calc_log_lik ? n_cells : 0, 3] int counts_rep;   // replicated counts per cell (posterior predictive)
  if (calc_log_lik) {
    vector[n_cells] eta = paired_eta(append_row(S, s_H'), b, X);
    if (n_cov > 0) eta += paired_offset(all_z, beta, all_beta_row);
    vector[n_cells] log_nu_cell = paired_log_nu(log_nu, nu_index, all_judge);
    log_lik = paired_log_lik(all_counts, all_log_coef, eta, ties, log_nu_cell);
    counts_rep = paired_rng(all_counts, eta, ties, log_nu_cell);
  }
}
