/**
 * Judge-specific order-effect Bradley-Terry-Luce model, unstructured, with
 * optional Davidson-Beaver or Rao-Kupper ties.
 *
 * Model (paper Sec. 3.1, one score vector per judge):
 *   LLM cell (k, i, j, a), eq. binomial-model-llm, judge k, items i < j,
 *   display order a = +1 (i first) or -1:
 *     eta = S[k, i] - S[k, j] + a b_k + z' beta_k
 *   human cell (i, j), eq. binomial-model-human (when H > 0):
 *     eta = s_H[i] - s_H[j] + z' beta_H
 *   outcome family (data ties; paired_likelihoods.stan):
 *     0  wins_i ~ Binomial(wins_i + wins_j, inv_logit(eta))
 *     1  Davidson-Beaver, 2  Rao-Kupper: a tie parameter nu_k = exp(log_nu[k])
 *        per LLM judge and nu_H for the people
 *   scores: each judge's S[k] and the people's s_H are centered (S[k] 1 = 0,
 *     s_H' 1 = 0), in the orthonormal (Helmert) basis Q_N of the centered
 *     subspace: S[k] = (Q_N s_raw[k]')', s_H = Q_N sH_raw.
 *   response covariates (n_cov > 0): beta_g = beta[beta_row[g]], each judge's
 *     and the people's own effects.
 *   Each cell's log-likelihood (with its multinomial coefficient) is
 *   multiplied by a data weight (1 = ordinary likelihood; 0 leaves it out).
 * With K = 0 and human cells only this is the human-only BTL (or Davidson /
 * Rao-Kupper) model; pooled BTL: give every LLM cell judge 1, K = 1.  Every
 * parameter is identified, so the same program serves the log density, the
 * MLE (optimizer) and NUTS.
 *
 * Priors (data; scale 0 = flat):
 *   s_raw, sH_raw ~ normal(0, prior_s_sd)   (= exchangeable normal on centered scores)
 *   b             ~ normal(0, prior_b_sd)
 *   beta_free     ~ normal(0, prior_beta_sd)
 *   log_nu        ~ normal(prior_log_nu_mean, prior_log_nu_sd)
 *
 * Jeffreys prior (Firth 1993; data firth = 1, codes as in firth.stan): adds
 * 1/2 log det of the Fisher information of (s_raw, sH_raw, b, beta_free), and
 * of the free log_nu with ties > 0, block diagonal over the judges and the
 * people, so the mode is each judge's (and the people's) bias-reduced
 * estimate.
 *
 * Extending: copy this program and add marked lines (the installed example
 * pydial/stan/examples/tie_gap.stan does; pydial.stan.program_code("tie_gap")),
 * pass the new data with extra={...} and sample it with
 * pydial.posterior(data, "judges", program="my.stan", extra={...}).
 */
functions {
#include bases.stan
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
  // ---- this program's own data (pydial.stan.schema.judges_data)
  real<lower=0> prior_s_sd;                          // prior sd of the score coordinates (0 = flat)
  real<lower=0> prior_b_sd;                          // prior sd of the order effects (0 = flat)
  real<lower=0> prior_beta_sd;                       // prior sd of the covariate effects (0 = flat)
  real prior_log_nu_mean;                            // prior mean of the log tie parameters
  real<lower=0> prior_log_nu_sd;                     // prior sd of the log tie parameters (0 = flat)
  int<lower=0, upper=2> firth;                       // Jeffreys prior (firth.stan): 0 none, 1 each judge's BTL or tie model (2: dial.stan only)
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
  matrix[N, N - 1] Q_N = centered_basis(N);          // orthonormal basis of {x : 1' x = 0}
  if (firth == 2) reject("judges.stan has no calibration block: firth must be 0 or 1");
  // Firth: d eta / d (s_raw, sH_raw, b, beta) per cell, every cell (zero-size when unused); the
  // people (judge K + 1) have the score block after the judges' and no order effect
  int F_rows = firth ? n_cells : 0;
  int F_cols = firth ? (K + (H > 0)) * (N - 1) + order * K + n_beta_free : 0;
  matrix[F_rows, F_cols] firth_X = rep_matrix(0, F_rows, F_cols);
  array[F_rows] int firth_n;
  for (t in 1:F_rows) {
    int k = all_judge[t];
    firth_X[t, ((k - 1) * (N - 1) + 1):(k * (N - 1))] = Q_N[all_i[t]] - Q_N[all_j[t]];
    if (order && all_a[t] != 0) firth_X[t, (K + (H > 0)) * (N - 1) + k] = all_a[t];
    for (u in 1:n_cov) {                             // the free covariate effects of the cell's row of beta
      int pos = beta_pos[all_beta_row[t], u];
      if (pos > 0) firth_X[t, (K + (H > 0)) * (N - 1) + order * K + pos] = all_z[t, u];
    }
    firth_n[t] = sum(all_counts[t]);
  }
  // with ties: the free tie parameters' columns (tie_firth_penalty), one per group without nu_zero
  int F_free = 0;
  array[K + 1] int firth_col = rep_array(0, K + 1);
  if (firth && ties > 0) {
    for (g in 1:(K + 1)) {
      if (nu_index[g] > 0) {
        F_free += 1;
        firth_col[g] = F_free;
      }
    }
  }
  matrix[F_rows, F_free] firth_E = rep_matrix(0, F_rows, F_free);
  for (t in 1:F_rows) {
    if (firth_col[all_judge[t]] > 0) firth_E[t, firth_col[all_judge[t]]] = 1;
  }
}
parameters {
  matrix[K, N - 1] s_raw;                            // judge scores in the coordinates of Q_N (row k = judge k)
  vector[H > 0 ? N - 1 : 0] sH_raw;                  // human scores in the coordinates of Q_N
  vector[order ? K : 0] b;                           // order effects b_k
  vector[n_beta_free] beta_free;                     // covariate effects not fixed at 0, row-major
  vector[n_nu] log_nu;                               // log tie parameters (judges 1..K, then the people)
}
transformed parameters {
  matrix[K, N] S = centered_times(s_raw')';          // centered judge scores Q_N s_raw[k]', row k = judge k
  vector[N] s_H = H > 0 ? col(centered_times(to_matrix(sH_raw)), 1) : rep_vector(0, N);   // centered human scores Q_N sH_raw
  array[n_beta] vector[n_cov] beta = beta_rows(beta_free, beta_pos, n_cov);   // covariate effects, 0 where fixed
}
model {
  // every cell's linear predictor and log tie parameter; the people are row K + 1 of the scores
  vector[n_cells] eta = paired_eta(append_row(S, s_H'), b, X);
  if (n_cov > 0) eta += paired_offset(all_z, beta, all_beta_row);
  vector[ties > 0 ? n_cells : 0] log_nu_cell;        // none in the binary family (paired_target ignores it)
  if (ties > 0) log_nu_cell = paired_log_nu(log_nu, nu_index, all_judge);
  target += paired_target(all_w_counts, all_w_log_coef, eta, ties, log_nu_cell);
  // Jeffreys prior of each judge's BTL (of its tie model with ties > 0)
  if (firth && ties == 0) target += firth_penalty(firth_X, eta, firth_n);
  if (firth && ties > 0) target += tie_firth_penalty(firth_X, firth_E, eta, log_nu_cell, firth_n, ties);
  // priors; scale 0 = flat
  if (prior_s_sd > 0) {
    target += normal_lpdf(to_vector(s_raw) | 0, prior_s_sd);
    target += normal_lpdf(sH_raw | 0, prior_s_sd);
  }
  if (prior_b_sd > 0) target += normal_lpdf(b | 0, prior_b_sd);
  if (prior_beta_sd > 0) target += normal_lpdf(beta_free | 0, prior_beta_sd);
  if (prior_log_nu_sd > 0) target += normal_lpdf(log_nu | prior_log_nu_mean, prior_log_nu_sd);
}
generated quantities {
  vector[n_nu] nu = exp(log_nu);                     // tie parameters
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
