/**
 * DIAL in the computational chart: weighted order-effect BTL likelihoods of
 * LLM judges and people on a shared low-rank score space, with optional
 * Davidson-Beaver or Rao-Kupper ties (paired_likelihoods.stan).
 *
 * Model (paper Sec. 3-5 and App. "Reduced score-space representation").
 *   LLM cell (k, i, j, a), eq. binomial-model-llm:
 *     eta = S[k, i] - S[k, j] + a b_k,   wins_i ~ Binomial(wins_i + wins_j, inv_logit(eta))
 *   human cell (i, j), eq. binomial-model-human: eta = s_H[i] - s_H[j]
 *   ties (tie_model > 0): a tie parameter nu_k per LLM judge and nu_H for
 *   people, see paired_likelihoods.stan; a group with nu_zero = 1 (no ties:
 *   the boundary MLE nu = 0) has binary cells and its log_nu entry is unused
 *   (point fits only: its log_nu is then flat).
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
 * -n_H Q_lambda (pydial.likelihood.Objective); human_w = 0 is the LLM-only
 * stage of eq. staged-calibrated-estimator; a zero weight leaves a cell out.
 *
 * Parameters are the reduced chart theta of pydial.model.Chart, in the same
 * order, all unconstrained, so Stan's unconstrained vector IS theta
 * (followed by log_nu when tie_model > 0):
 *   A_free = rows 1..K-1 of A, row-major;  A[K] = K e_1 - sum of the others
 *   B_free = rows 1..N-1 of B, row-major;  B[N] = - sum of the others
 *   c      = alpha (calibration = 1), c (calibration = 2), empty (0)
 *   b      = order effects (use_order = 1), empty (0)
 *   log_nu = log tie parameters: LLM judges 1..K, then people (if H > 0)
 * fix_llm = 1 makes A, B data (A_fix, B_fix) and drops b and the judges' tie
 * parameters: only the calibration (and nu_H) is fitted, the second stage of
 * eq. staged-calibrated-estimator (pass C = 0).
 * The chart keeps the gauge B -> B G, A -> A G^{-T} with G e_1 = e_1 (eq.
 * gauge), r (r + 1) flat directions: this program is for the log density and
 * the penalized MLE (optimizer), not for NUTS (see dial_sample.stan).
 *
 * Priors (penalty) are switched on by data: prior_sd_* > 0 adds an
 * independent normal(0, prior_sd_*) term on that block; 0 = flat.  A ridge on
 * the chart coordinates is not gauge invariant; with all scales 0 the MLE is.
 *
 * Jeffreys prior (Firth 1993, data flag firth; firth.stan; binary cells only):
 *   1 = the LLM cells as one binomial GLM (K = 1, r = 0: human-only or pooled
 *       BTL), design (D T, a) in (B_free, b);
 *   2 = the human block: the calibration GLM of the human cells, design
 *       X = D_H M with M = B[, 1:d], with the basis normalized,
 *       1/2 [log det(X' W X) - log det(M' M)] (gauge invariant; for the
 *       calibration stage, with B held fixed, the Firth penalty of c).
 *
 * How to extend.  Copy this file (keep `#include paired_likelihoods.stan`;
 * pydial.stan.posterior / compile_model find includes beside pydial's own),
 * change the linear predictor or the tie parameter per cell in the model
 * block AND in generated quantities (both call paired_eta and
 * paired_log_lik), add any new data after the shared schema and pass it with
 * pydial.stan.standata(..., extra={...}).  A new tie model goes into
 * paired_log_lik of paired_likelihoods.stan (one more tie_model code).
 */
functions {
#include paired_likelihoods.stan
#include firth.stan
  // log nu of each LLM cell: its judge's entry of log_nu (0 without ties), -infinity for nu_zero judges
  vector cell_log_nu(vector log_nu, array[] int judge, array[] int nu_zero) {
    int C = size(judge);
    vector[C] out = rep_vector(0, C);
    if (num_elements(log_nu) == 0) return out;
    for (t in 1:C) out[t] = nu_zero[judge[t]] ? negative_infinity() : log_nu[judge[t]];
    return out;
  }
  // log nu of the H human cells: the last entry of log_nu, -infinity when the people have nu = 0
  vector human_log_nu(vector log_nu, int H, int zero) {
    if (num_elements(log_nu) == 0) return rep_vector(0, H);
    return rep_vector(zero ? negative_infinity() : log_nu[num_elements(log_nu)], H);
  }
}
data {
  // ---- the data schema shared by dial.stan, dial_sample.stan and judges.stan
  int<lower=2> N;                                    // number of items
  int<lower=0> K;                                    // number of LLM judges
  int<lower=0, upper=1> use_order;                   // 1 = order effects b_k; 0 = b = 0 (DIAL-noPos)
  int<lower=0, upper=2> tie_model;                   // 0 binary, 1 Davidson-Beaver, 2 Rao-Kupper (paired_likelihoods.stan)

  int<lower=0> C;                                    // number of LLM cells (k, i, j, a)
  array[C] int<lower=1, upper=K> cell_judge;         // judge k of the cell
  array[C] int<lower=1, upper=N> cell_i;             // canonical item i (i < j)
  array[C] int<lower=1, upper=N> cell_j;             // canonical item j
  array[C] int<lower=-1, upper=1> cell_a;            // display order: +1 if item i shown first, -1 if second
  array[C, 3] int<lower=0> cell_counts;              // (wins of item i, wins of item j, ties)
  vector<lower=0>[C] cell_w;                         // weight of the cell's log-likelihood

  int<lower=0> H;                                    // number of human cells (i, j)
  array[H] int<lower=1, upper=N> human_i;            // canonical item i (i < j)
  array[H] int<lower=1, upper=N> human_j;            // canonical item j
  array[H, 3] int<lower=0> human_counts;             // (wins of item i, wins of item j, ties)
  vector<lower=0>[H] human_w;                        // weight of the cell's log-likelihood
  int<lower=0, upper=1> calc_log_lik;                // 1 = write log_lik per cell (LLM cells, then human)

  int<lower=0> r;                                    // disagreement rank; S has rank r + 1
  int<lower=0, upper=2> calibration;                 // 0 = no human block; 1 = M = mu; 2 = M = W
  int<lower=0, upper=1> fix_llm;                     // 1 = A, B are data: fit the calibration only
  vector[fix_llm ? (K - 1) * (r + 1) : 0] A_fix;     // A_free when fix_llm = 1
  vector[fix_llm ? (N - 1) * (r + 1) : 0] B_fix;     // B_free when fix_llm = 1

  real<lower=0> prior_sd_A;                          // normal prior scale on A_free (0 = flat)
  real<lower=0> prior_sd_B;                          // normal prior scale on B_free (0 = flat)
  real<lower=0> prior_sd_c;                          // normal prior scale on the calibration coordinate (0 = flat)
  real<lower=0> prior_sd_b;                          // normal prior scale on the order effects (0 = flat)
  real<lower=0> prior_sd_log_nu;                     // normal(0, sd) prior on log_nu (0 = flat)
  int<lower=0, upper=2> firth;                       // Jeffreys prior: 0 = none, 1 = LLM cells as one GLM, 2 = human calibration block
  array[K + 1] int<lower=0, upper=1> nu_zero;        // 1 = the group (judges 1..K, people) has nu = 0: binary cells
}
transformed data {
  // ---- checks and constants of the shared data schema
  vector[C] cell_log_coef = paired_log_coef(cell_counts);
  vector[H] human_log_coef = paired_log_coef(human_counts);
  array[H] int human_judge = rep_array(1, H);        // people: one judge, no order effect
  array[H] int human_a = rep_array(0, H);
  for (t in 1:C) {
    if (tie_model == 0 && cell_counts[t, 3] > 0) reject("LLM cell ", t, " has ties but tie_model = 0");
  }
  for (t in 1:H) {
    if (tie_model == 0 && human_counts[t, 3] > 0) reject("human cell ", t, " has ties but tie_model = 0");
    if (tie_model > 0 && nu_zero[K + 1] && human_counts[t, 3] > 0) reject("human cell ", t, " has ties but nu_zero");
  }
  for (t in 1:C) {
    if (tie_model > 0 && nu_zero[cell_judge[t]] && cell_counts[t, 3] > 0) reject("LLM cell ", t, " has ties but nu_zero");
  }

  int q = r + 1;                                     // columns of A and B
  int d = calibration == 0 ? 0 : (calibration == 1 ? 1 : q);   // calibration dimension
  int K_free = fix_llm ? 0 : K;                      // judges whose b and nu are parameters
  int T = tie_model == 0 ? 0 : K_free + (H > 0);     // number of tie parameters
  if (K < 1) reject("dial.stan needs K >= 1 LLM judges");
  if (r > K - 1 || q > N - 1) {
    reject("rank r = ", r, " needs r <= K - 1 = ", K - 1, " and r + 1 <= N - 1 = ", N - 1,
           " (Cond. llm-structure)");
  }
  if (calibration == 0 && H > 0) reject("human cells need a calibration basis (calibration = 1 or 2)");
  if (fix_llm && C > 0) reject("fix_llm = 1 fits the calibration alone: pass C = 0 LLM cells");
  if (firth > 0 && tie_model > 0) reject("firth > 0 needs binary cells (tie_model = 0)");
  // Firth designs (zero-size when unused); T_N: s = T_N s[1:(N-1)] for centered s
  array[C] int cell_n;                               // decisive comparisons per cell
  array[H] int human_n;
  for (t in 1:C) cell_n[t] = cell_counts[t, 1] + cell_counts[t, 2];
  for (t in 1:H) human_n[t] = human_counts[t, 1] + human_counts[t, 2];
  matrix[N, N - 1] T_N = append_row(diag_matrix(rep_vector(1, N - 1)), rep_row_vector(-1, N - 1));
  matrix[firth == 1 ? C : 0, firth == 1 ? N - 1 + use_order : 0] firth_X;
  matrix[firth == 2 ? H : 0, N] firth_D = difference_design(human_i[1:(firth == 2 ? H : 0)],
                                                            human_j[1:(firth == 2 ? H : 0)], N);
  if (firth == 1) {
    if (K != 1 || r != 0 || fix_llm) reject("firth = 1 needs K = 1, r = 0 and fix_llm = 0 (one binomial GLM)");
    firth_X[:, 1:(N - 1)] = difference_design(cell_i, cell_j, N) * T_N;
    if (use_order) firth_X[:, N] = to_vector(cell_a);
  }
}
parameters {
  vector[fix_llm ? 0 : (K - 1) * q] A_free;          // rows 1..K-1 of A, row-major
  vector[fix_llm ? 0 : (N - 1) * q] B_free;          // rows 1..N-1 of B, row-major
  vector[d] c;                                       // alpha (M = mu) or c (M = W)
  vector[use_order && !fix_llm ? K : 0] b;           // judge order effects b_k
  vector[T] log_nu;                                  // log tie parameters (judges 1..K, then people)
}
transformed parameters {
  matrix[K, N] S;                                    // judge scores S = A B'
  matrix[N, r + 1] B;                                // item loadings (B' 1 = 0)
  vector[N] s_H = rep_vector(0, N);                  // calibrated human score
  {
    // eq. overparam: rebuild A (A' 1 = K e_1) and B (B' 1 = 0) from the reduced rows
    vector[(K - 1) * q] Av = fix_llm ? A_fix : A_free;
    vector[(N - 1) * q] Bv = fix_llm ? B_fix : B_free;
    matrix[K, q] A;
    for (k in 1:(K - 1)) A[k] = Av[((k - 1) * q + 1):(k * q)]';
    A[K] = -(rep_row_vector(1, K - 1) * A[1:(K - 1)]);
    A[K, 1] += K;
    for (i in 1:(N - 1)) B[i] = Bv[((i - 1) * q + 1):(i * q)]';
    B[N] = -(rep_row_vector(1, N - 1) * B[1:(N - 1)]);
    S = A * B';
    // s_H = B ctilde, ctilde = (alpha, 0, ..., 0) or c
    if (calibration > 0) {
      vector[q] ctilde = rep_vector(0, q);
      ctilde[1:d] = c;
      s_H = B * ctilde;
    }
  }
}
model {
  vector[K] b_k = size(b) > 0 ? b : rep_vector(0, K);
  vector[C] eta = paired_eta(S, cell_judge, cell_i, cell_j, cell_a, b_k);
  vector[C] log_nu_c = cell_log_nu(log_nu, cell_judge, nu_zero);
  vector[H] eta_h = paired_eta(to_matrix(s_H'), human_judge, human_i, human_j, human_a, rep_vector(0, 1));
  vector[H] log_nu_h = human_log_nu(log_nu, H, nu_zero[K + 1]);
  target += dot_product(cell_w, cell_log_coef + paired_log_lik(cell_counts, eta, tie_model, log_nu_c));
  target += dot_product(human_w, human_log_coef + paired_log_lik(human_counts, eta_h, tie_model, log_nu_h));
  if (firth == 1) target += firth_penalty(firth_X, eta, cell_n);
  if (firth == 2 && H > 0) {
    target += firth_penalty(firth_D * B[:, 1:d], eta_h, human_n) - 0.5 * log_determinant(crossprod(B[:, 1:d]));
  }

  // optional normal priors (penalized MLE); 0 = flat
  if (prior_sd_A > 0) target += normal_lpdf(A_free | 0, prior_sd_A);
  if (prior_sd_B > 0) target += normal_lpdf(B_free | 0, prior_sd_B);
  if (prior_sd_c > 0) target += normal_lpdf(c | 0, prior_sd_c);
  if (prior_sd_b > 0) target += normal_lpdf(b | 0, prior_sd_b);
  if (prior_sd_log_nu > 0) target += normal_lpdf(log_nu | 0, prior_sd_log_nu);
}
generated quantities {
  vector[calc_log_lik ? C + H : 0] log_lik;          // log p(counts) per cell (LLM cells, then human)
  array[calc_log_lik ? C + H : 0, 3] int counts_rep; // replicated counts per cell (posterior predictive)
  if (calc_log_lik) {
    vector[K] b_k = size(b) > 0 ? b : rep_vector(0, K);
    vector[C] log_nu_c = cell_log_nu(log_nu, cell_judge, nu_zero);
    vector[H] log_nu_h = human_log_nu(log_nu, H, nu_zero[K + 1]);
    vector[C] eta = paired_eta(S, cell_judge, cell_i, cell_j, cell_a, b_k);
    vector[H] eta_h = paired_eta(to_matrix(s_H'), human_judge, human_i, human_j, human_a, rep_vector(0, 1));
    log_lik[1:C] = cell_log_coef + paired_log_lik(cell_counts, eta, tie_model, log_nu_c);
    log_lik[(C + 1):(C + H)] = human_log_coef + paired_log_lik(human_counts, eta_h, tie_model, log_nu_h);
    counts_rep[1:C] = paired_rng(cell_counts, eta, tie_model, log_nu_c);
    counts_rep[(C + 1):(C + H)] = paired_rng(human_counts, eta_h, tie_model, log_nu_h);
  }
}
