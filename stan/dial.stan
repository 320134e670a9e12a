/**
 * DIAL in the computational chart: weighted order-effect BTL likelihoods of
 * LLM judges and people on a shared low-rank score space.
 *
 * Model (paper Sec. 3-5 and App. "Reduced score-space representation").
 *   LLM cells, eq. binomial-model-llm:
 *     Y_kij^(a) ~ Binomial(n_kij^(a), inv_logit(S[k, i] - S[k, j] + a b_k))
 *   human cells, eq. binomial-model-human:
 *     Y_Hij ~ Binomial(n_Hij, inv_logit(s_i - s_j))
 *   structure (eq. overparam with the computational restriction):
 *     S = A B'            A: K x (r + 1), A' 1 = K e_1
 *                         B: N x (r + 1), B' 1 = 0
 *     s = alpha B e_1     consensus calibration, M = mu   (calibration = 1)
 *     s = B c             full-space calibration, M = W   (calibration = 2)
 *   Because A' 1 = K e_1, B e_1 = S' 1 / K is the mean judge score, i.e. the
 *   consensus direction mu up to the scale 1' gamma / K.
 *
 * Target (eq. weighted-loss, weighted-joint-estimator): with per-judgment
 * weights w given as data,
 *   target = - sum_cells w_c [n_c log(1 + e^eta_c) - y_c eta_c] + log prior,
 * the negative of pydial.likelihood.Objective.value.  w_human = 1 / n_H and
 * w_llm = lambda / n_LLM give -Q_lambda; w_human = 0 gives the LLM-only stage
 * of eq. staged-calibrated-estimator; a zero weight on one cell leaves it out.
 * No binomial coefficients (constants).  The pydial engine passes the same
 * weights multiplied by n_H (log-likelihood scale) for better conditioned
 * optimizer tolerances.
 *
 * Parameters are the reduced chart theta of pydial.model.Chart, in the same
 * order, all unconstrained, so Stan's unconstrained vector IS theta:
 *   A_free = rows 1..K-1 of A, row-major;  A[K] = K e_1 - sum of the others
 *   B_free = rows 1..N-1 of B, row-major;  B[N] = - sum of the others
 *   c      = alpha (calibration = 1), c (calibration = 2), empty (0)
 *   b      = order effects (use_order = 1), empty (0)
 * The chart keeps the gauge B -> B G, A -> A G^{-T} with G e_1 = e_1 (eq.
 * gauge), r (r + 1) flat directions: this program is for the log density and
 * the penalized MLE (optimizer), not for NUTS (see dial_sample.stan).
 *
 * Priors (penalty) are switched on by data: prior_sd_* > 0 adds an
 * independent normal(0, prior_sd_*) term on that block; 0 = flat.  A ridge on
 * the chart coordinates is not gauge invariant; with all scales 0 the MLE is.
 *
 * Jeffreys prior (Firth 1993, data flag firth; firth.stan):
 *   1 = the LLM cells as one binomial GLM (K = 1, r = 0: human-only or pooled
 *       BTL), design (D T, a) in (B_free, b);
 *   2 = the human block: the calibration GLM of the human cells, design
 *       X = D_H M with M = B[, 1:d], with the basis normalized,
 *       1/2 [log det(X' W X) - log det(M' M)] (gauge invariant; for the
 *       calibration stage, with B held fixed, the Firth penalty of c).
 */
functions {
#include paired_likelihoods.stan
#include firth.stan
}
data {
  int<lower=2> N;                                    // number of items
  int<lower=1> K;                                    // number of LLM judges
  int<lower=0> r;                                    // disagreement rank; S has rank r + 1
  int<lower=0, upper=1> use_order;                   // 1 = order effects b_k; 0 = b = 0 (DIAL-noPos)
  int<lower=0, upper=2> calibration;                 // 0 = no human block; 1 = M = mu; 2 = M = W

  int<lower=0> C;                                    // number of LLM cells (k, i, j, a)
  array[C] int<lower=1, upper=K> cell_judge;         // judge k of the cell
  array[C] int<lower=1, upper=N> cell_i;             // canonical item i (i < j)
  array[C] int<lower=1, upper=N> cell_j;             // canonical item j
  array[C] int<lower=-1, upper=1> cell_a;            // display order: +1 if item i shown first, -1 if second
  array[C] int<lower=0> cell_n;                      // decisive judgments n_kij^(a)
  array[C] int<lower=0> cell_y;                      // judgments preferring item i, Y_kij^(a)
  vector<lower=0>[C] cell_w;                         // weight of each judgment in the cell (lambda / n_LLM)

  int<lower=0> H;                                    // number of human cells (i, j)
  array[H] int<lower=1, upper=N> human_i;            // canonical item i (i < j)
  array[H] int<lower=1, upper=N> human_j;            // canonical item j
  array[H] int<lower=0> human_n;                     // decisive human judgments n_Hij
  array[H] int<lower=0> human_y;                     // human judgments preferring item i, Y_Hij
  vector<lower=0>[H] human_w;                        // weight of each judgment in the cell (1 / n_H)

  real<lower=0> prior_sd_A;                          // normal prior scale on A_free (0 = flat)
  real<lower=0> prior_sd_B;                          // normal prior scale on B_free (0 = flat)
  real<lower=0> prior_sd_c;                          // normal prior scale on the calibration coordinate (0 = flat)
  real<lower=0> prior_sd_b;                          // normal prior scale on the order effects (0 = flat)
  int<lower=0, upper=2> firth;                       // Jeffreys prior: 0 = none, 1 = LLM cells as one GLM, 2 = human calibration block
}
transformed data {
  int q = r + 1;                                     // columns of A and B
  int d = calibration == 0 ? 0 : (calibration == 1 ? 1 : q);   // calibration dimension
  if (r > K - 1 || q > N - 1) {
    reject("rank r = ", r, " needs r <= K - 1 = ", K - 1, " and r + 1 <= N - 1 = ", N - 1,
           " (Cond. llm-structure)");
  }
  if (calibration == 0 && H > 0) {
    reject("human cells need a calibration basis (calibration = 1 or 2)");
  }
  for (t in 1:C) {
    if (cell_y[t] > cell_n[t]) reject("LLM cell ", t, ": y > n");
  }
  for (t in 1:H) {
    if (human_y[t] > human_n[t]) reject("human cell ", t, ": y > n");
  }
  // Firth designs (zero-size when unused); T_N: s = T_N s[1:(N-1)] for centered s
  matrix[N, N - 1] T_N = append_row(diag_matrix(rep_vector(1, N - 1)), rep_row_vector(-1, N - 1));
  matrix[firth == 1 ? C : 0, firth == 1 ? N - 1 + use_order : 0] firth_X;
  matrix[firth == 2 ? H : 0, N] firth_D = difference_design(human_i[1:(firth == 2 ? H : 0)],
                                                            human_j[1:(firth == 2 ? H : 0)], N);
  if (firth == 1) {
    if (K != 1 || r != 0) reject("firth = 1 needs K = 1 and r = 0 (one binomial GLM)");
    firth_X[:, 1:(N - 1)] = difference_design(cell_i, cell_j, N) * T_N;
    if (use_order) firth_X[:, N] = to_vector(cell_a);
  }
}
parameters {
  vector[(K - 1) * q] A_free;                        // rows 1..K-1 of A, row-major
  vector[(N - 1) * q] B_free;                        // rows 1..N-1 of B, row-major
  vector[d] c;                                       // alpha (M = mu) or c (M = W)
  vector[use_order ? K : 0] b;                       // judge order effects b_k
}
model {
  // eq. overparam: rebuild A (A' 1 = K e_1) and B (B' 1 = 0) from the reduced rows
  matrix[K, q] A;
  matrix[N, q] B;
  for (k in 1:(K - 1)) {
    A[k] = A_free[((k - 1) * q + 1):(k * q)]';
  }
  A[K] = -(rep_row_vector(1, K - 1) * A[1:(K - 1)]);
  A[K, 1] += K;
  for (i in 1:(N - 1)) {
    B[i] = B_free[((i - 1) * q + 1):(i * q)]';
  }
  B[N] = -(rep_row_vector(1, N - 1) * B[1:(N - 1)]);

  // eq. llm-negloglik: eta = S[k, i] - S[k, j] + a b_k with S = A B'
  if (C > 0) {
    vector[C] eta = rows_dot_product(A[cell_judge], B[cell_i] - B[cell_j]);
    if (use_order) {
      eta += to_vector(cell_a) .* b[cell_judge];
    }
    target += -dot_product(cell_w, binomial_nll(eta, cell_n, cell_y));
    if (firth == 1) target += firth_penalty(firth_X, eta, cell_n);
  }

  // eq. human-full-loss at s = B ctilde, ctilde = (alpha, 0, ..., 0) or c
  if (H > 0) {
    vector[q] ctilde = rep_vector(0, q);
    ctilde[1:d] = c;
    vector[N] s = B * ctilde;
    vector[H] eta_h = s[human_i] - s[human_j];
    target += -dot_product(human_w, binomial_nll(eta_h, human_n, human_y));
    if (firth == 2) {
      target += firth_penalty(firth_D * B[:, 1:d], eta_h, human_n) - 0.5 * log_determinant(crossprod(B[:, 1:d]));
    }
  }

  // optional normal priors (penalized MLE); 0 = flat
  if (prior_sd_A > 0) target += normal_lpdf(A_free | 0, prior_sd_A);
  if (prior_sd_B > 0) target += normal_lpdf(B_free | 0, prior_sd_B);
  if (prior_sd_c > 0) target += normal_lpdf(c | 0, prior_sd_c);
  if (prior_sd_b > 0) target += normal_lpdf(b | 0, prior_sd_b);
}
