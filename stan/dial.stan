/**
 * DIAL in the computational chart: the log density and the penalized MLE of
 * the weighted order-effect BTL likelihood of LLM judges and people on a
 * shared low-rank score space (pydial's Stan optimizer; for NUTS see
 * dial_sample.stan).
 *
 * Model (paper Sec. 3-5 and App. "Reduced score-space representation").
 *   LLM cell (k, i, j, a), eq. binomial-model-llm, judge k, items i < j,
 *   display order a = +1 (i first) or -1:
 *     eta = S[k, i] - S[k, j] + a b_k + z' beta_k
 *   human cell (i, j), eq. binomial-model-human:
 *     eta = s_H[i] - s_H[j] + z' beta_H
 *   outcome family (data ties; paired_likelihoods.stan):
 *     0  wins_i ~ Binomial(wins_i + wins_j, inv_logit(eta))
 *     1  Davidson-Beaver, 2  Rao-Kupper: a tie parameter nu_k = exp(log_nu[k])
 *        per LLM judge and nu_H for the people; a group with nu_zero = 1 (no
 *        tie: the boundary MLE nu = 0) has binary cells, its log_nu entry unused
 *   low-rank structure, eq. overparam with the computational restriction:
 *     S = A B',   A: K x (r + 1), A' 1 = K e_1;   B: N x (r + 1), B' 1 = 0
 *     s_H = alpha B e_1   (calibration = 1, M = mu; c = alpha)
 *     s_H = B c           (calibration = 2, M = W)
 *     Because A' 1 = K e_1, B e_1 = S' 1 / K is the mean judge score: the
 *     consensus gamma_bar mu; the other columns of B span the disagreement V.
 *   response covariates (n_cov > 0): z the cell's comparison covariates,
 *     beta_g = beta[beta_row[g]] the effects of its group (one row per judge
 *     or one shared by the judges, and the people's); S and s_H are then the
 *     style-controlled scores (z = 0).
 *   target, eq. weighted-loss: sum over cells of w log p(counts) plus the
 *     priors below, log p with its multinomial coefficient.  cell_w =
 *     lambda n_H / n_LLM and human_w = 1 give -n_H Q_lambda
 *     (pydial.model.likelihood.Objective) up to those coefficients; human_w =
 *     0 is the LLM-only stage of eq. staged-calibrated-estimator; a zero
 *     weight leaves a cell out.
 * fix_llm = 1 makes A and B data (A_fix, B_fix) and drops b and the judges'
 * tie parameters: only the calibration c (with beta_H and nu_H) is fitted,
 * the second stage of eq. staged-calibrated-estimator (pass C = 0; with
 * covariates beta_row gives the people row 1 and the judges 0: beta is then
 * beta_H).
 *
 * Parameters: the free rows of A and B (row K of A and row N of B follow from
 * A' 1 = K e_1 and B' 1 = 0), c, b, the free entries of beta and log nu, all
 * unconstrained.  The chart keeps the gauge B -> B G, A -> A G^{-T} with
 * G e_1 = e_1 (eq. gauge): r (r + 1) flat directions, so this program is for
 * the log density and the optimizer, not for NUTS.  pydial.stan.parameters
 * maps them to the chart coordinates theta of pydial.model.Chart by name.
 *
 * Priors (penalty), switched on by data: prior_<block>_sd > 0 adds
 * normal(0, prior_<block>_sd) on that block (log_nu: mean prior_log_nu_mean);
 * 0 = flat.  A ridge on the chart coordinates is not gauge invariant; with
 * all scales 0 the mode is the MLE, which is.
 *
 * Jeffreys prior (Firth 1993; data firth, codes as in firth.stan):
 *   1 = each judge's BTL: allowed where the LLM cells are one binomial GLM
 *       (K = 1, r = 0: the pooled BTL), design (D T_N, a) in (B_free, b);
 *   2 = the human block: the calibration GLM of the human cells, design
 *       X = [D_H M, Z_H] with M = B[, 1:d], the basis normalized:
 *       1/2 [log det(X' W X) - log det(M' M)] (gauge invariant; for the
 *       calibration stage, with B held fixed, the Firth penalty of c).
 *   With ties > 0 the same GLMs of the tie family, with the free log nu
 *   (tie_firth_penalty).
 *
 * Extending: copy this program (pydial.stan.program_code("dial") gives it
 * with the functions expanded), add data, parameters, their priors and an
 * offset to eta or log_nu_cell where they are computed (model block and
 * generated quantities alike); pass the new data with
 * pydial.stan.standata(..., extra={...}) and compile it with
 * pydial.stan.compile_model("my.stan").
 */
functions {
#include paired_likelihoods.stan
#include firth.stan
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
  // ---- this program's own data (pydial.stan.schema.dial_data)
  int<lower=0> rank;                                 // disagreement rank r (Python rank=); S has rank r + 1
  int<lower=0, upper=2> calibration;                 // 0 = no human block; 1 = M = mu; 2 = M = W
  int<lower=0, upper=1> fix_llm;                     // 1 = A, B are data: fit the calibration only
  matrix[fix_llm ? K - 1 : 0, rank + 1] A_fix;       // rows 1..K-1 of A when fix_llm = 1
  matrix[fix_llm ? N - 1 : 0, rank + 1] B_fix;       // rows 1..N-1 of B when fix_llm = 1
  real<lower=0> prior_A_sd;                          // prior sd of A_free (0 = flat)
  real<lower=0> prior_B_sd;                          // prior sd of B_free (0 = flat)
  real<lower=0> prior_c_sd;                          // prior sd of the calibration coordinates (0 = flat)
  real<lower=0> prior_b_sd;                          // prior sd of the order effects (0 = flat)
  real<lower=0> prior_beta_sd;                       // prior sd of the covariate effects (0 = flat)
  real prior_log_nu_mean;                            // prior mean of the log tie parameters
  real<lower=0> prior_log_nu_sd;                     // prior sd of the log tie parameters (0 = flat)
  int<lower=0, upper=2> firth;                       // Jeffreys prior (firth.stan): 0 none, 1 each judge's BTL, 2 the calibration GLM
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
    = paired_design(K + 1, N, all_judge, all_i, all_j, all_a, order && !fix_llm ? K : 0);
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
  // tie parameters (ties > 0): log_nu[k] of LLM judge k (none with fix_llm), then the people's
  int n_nu = ties == 0 ? 0 : (fix_llm ? 0 : K) + (H > 0);
  array[K + 1] int nu_index = tie_index(n_nu, H, nu_zero);
  // ---- sizes and checks
  int q = rank + 1;                                  // columns of A and B
  int d = calibration == 0 ? 0 : (calibration == 1 ? 1 : q);   // calibration dimension
  if (K < 1) reject("dial.stan needs K >= 1 LLM judges");
  if (rank > K - 1 || q > N - 1) {
    reject("rank r = ", rank, " needs r <= K - 1 = ", K - 1, " and r + 1 <= N - 1 = ", N - 1,
           " (r is the disagreement rank of the structured LLM model)");
  }
  if (calibration == 0 && H > 0) reject("human cells need a calibration basis (calibration = 1 or 2)");
  if (fix_llm && C > 0) reject("fix_llm = 1 fits the calibration alone: pass C = 0 LLM cells");
  // ---- Firth designs (zero-size when unused); T_N: s = T_N s[1:(N-1)] for centered s
  // the people's covariates with an effect (not fixed at 0): the columns Z_H of the calibration GLM
  int n_human_cov = 0;
  if (n_cov > 0 && beta_row[K + 1] > 0) {
    for (u in 1:n_cov) n_human_cov += 1 - beta_fixed[beta_row[K + 1], u];
  }
  array[n_human_cov] int human_cov;
  if (n_human_cov > 0) {
    int v = 0;
    for (u in 1:n_cov) {
      if (!beta_fixed[beta_row[K + 1], u]) {
        v += 1;
        human_cov[v] = u;
      }
    }
  }
  array[C] int cell_n;                               // decisive comparisons per cell
  array[H] int human_n;
  for (t in 1:C) cell_n[t] = cell_counts[t, 1] + cell_counts[t, 2];
  for (t in 1:H) human_n[t] = human_counts[t, 1] + human_counts[t, 2];
  matrix[N, N - 1] T_N = append_row(diag_matrix(rep_vector(1, N - 1)), rep_row_vector(-1, N - 1));
  matrix[firth == 1 ? C : 0, firth == 1 ? N - 1 + order + n_beta_free : 0] firth_X;
  matrix[firth == 2 ? H : 0, N] firth_D = difference_design(human_i[1:(firth == 2 ? H : 0)],
                                                            human_j[1:(firth == 2 ? H : 0)], N);
  if (firth == 1) {
    if (K != 1 || rank != 0 || fix_llm) reject("firth = 1 needs K = 1, r = 0 and fix_llm = 0 (one binomial GLM)");
    firth_X[:, 1:(N - 1)] = difference_design(cell_i, cell_j, N) * T_N;
    if (order) firth_X[:, N] = to_vector(cell_a);
    for (u in 1:n_cov) {                             // the one judge's free covariate effects
      if (beta_pos[1, u] > 0) firth_X[:, N - 1 + order + beta_pos[1, u]] = cell_z[:, u];
    }
  }
  // with ties (tie_firth_penalty): comparisons per cell, ties included, and the free tie parameter's column
  array[C] int cell_total;
  array[H] int human_total;
  for (t in 1:C) cell_total[t] = sum(cell_counts[t]);
  for (t in 1:H) human_total[t] = sum(human_counts[t]);
  matrix[firth == 1 ? C : 0, firth == 1 && ties > 0 && nu_index[1] > 0] firth_E1 = rep_matrix(1, firth == 1 ? C : 0,
                                                                                          firth == 1 && ties > 0 && nu_index[1] > 0);
  matrix[firth == 2 ? H : 0, firth == 2 && ties > 0 && nu_index[K + 1] > 0] firth_E2
    = rep_matrix(1, firth == 2 ? H : 0, firth == 2 && ties > 0 && nu_index[K + 1] > 0);
}
parameters {
  matrix[fix_llm ? 0 : K - 1, q] A_free;             // rows 1..K-1 of the judge loadings A
  matrix[fix_llm ? 0 : N - 1, q] B_free;             // rows 1..N-1 of the item loadings B
  vector[d] c;                                       // calibration coordinates: alpha (M = mu) or c (M = W)
  vector[order && !fix_llm ? K : 0] b;               // order effects b_k
  vector[n_beta_free] beta_free;                     // covariate effects not fixed at 0, row-major
  vector[n_nu] log_nu;                               // log tie parameters: judges 1..K (none with fix_llm), then the people
}
transformed parameters {
  matrix[K, N] S;                                    // judge scores S = A B'
  matrix[N, q] B;                                    // item loadings, B' 1 = 0
  vector[N] s_H = rep_vector(0, N);                  // calibrated human score
  array[n_beta] vector[n_cov] beta = beta_rows(beta_free, beta_pos, n_cov);   // covariate effects, 0 where fixed
  {
    // eq. overparam: the last rows of A (A' 1 = K e_1) and B (B' 1 = 0) from the others
    matrix[K - 1, q] A_top = fix_llm ? A_fix : A_free;
    matrix[K, q] A = append_row(A_top, -(rep_row_vector(1, K - 1) * A_top));
    A[K, 1] += K;
    B[1:(N - 1)] = fix_llm ? B_fix : B_free;
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
  // every cell's linear predictor and log tie parameter; the people are row K + 1 of the scores
  vector[n_cells] eta = paired_eta(append_row(S, s_H'), b, X);
  if (n_cov > 0) eta += paired_offset(all_z, beta, all_beta_row);
  vector[ties > 0 ? n_cells : 0] log_nu_cell;        // none in the binary family (paired_target ignores it)
  if (ties > 0) log_nu_cell = paired_log_nu(log_nu, nu_index, all_judge);
  target += paired_target(all_w_counts, all_w_log_coef, eta, ties, log_nu_cell);
  // Jeffreys prior: 1 = the LLM cells' GLM, 2 = the human calibration GLM [D_H M, Z_H], basis normalized
  if (firth == 1 && ties == 0) target += firth_penalty(firth_X, eta[1:C], cell_n);
  if (firth == 1 && ties > 0) target += tie_firth_penalty(firth_X, firth_E1, eta[1:C], log_nu_cell[1:C], cell_total, ties);
  if (firth == 2 && H > 0 && ties == 0) {
    target += firth_penalty(append_col(firth_D * B[:, 1:d], human_z[:, human_cov]), eta[(C + 1):n_cells], human_n)
              - 0.5 * log_determinant(crossprod(B[:, 1:d]));
  }
  if (firth == 2 && H > 0 && ties > 0) {
    target += tie_firth_penalty(append_col(firth_D * B[:, 1:d], human_z[:, human_cov]), firth_E2, eta[(C + 1):n_cells],
                                log_nu_cell[(C + 1):n_cells], human_total, ties)
              - 0.5 * log_determinant(crossprod(B[:, 1:d]));
  }
  // normal penalties of the penalized MLE; scale 0 = flat
  if (prior_A_sd > 0) target += normal_lpdf(to_vector(A_free) | 0, prior_A_sd);
  if (prior_B_sd > 0) target += normal_lpdf(to_vector(B_free) | 0, prior_B_sd);
  if (prior_c_sd > 0) target += normal_lpdf(c | 0, prior_c_sd);
  if (prior_b_sd > 0) target += normal_lpdf(b | 0, prior_b_sd);
  if (prior_beta_sd > 0) target += normal_lpdf(beta_free | 0, prior_beta_sd);
  if (prior_log_nu_sd > 0) target += normal_lpdf(log_nu | prior_log_nu_mean, prior_log_nu_sd);
}
generated quantities {
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
