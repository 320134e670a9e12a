/**
 * EXTENSION of pydial's judges.stan (lines marked EXTENSION): the tie rate
 * depends on the score gap.  A cell's log tie parameter is
 *   log nu_k - kappa * eta^2,   eta = S[k, i] - S[k, j] + a b_k,
 * so ties become rarer (kappa > 0) or more frequent (kappa < 0) as the gap
 * grows, beyond the dependence that the Davidson model already has
 * (P(tie) = nu / (e^{eta/2} + e^{-eta/2} + nu)).  kappa = 0 is judges.stan.
 * Fitted and compared with judges.stan in examples/tie_gap.py.
 *
 * Judge-specific order-effect Bradley-Terry-Luce model, unstructured, with
 * optional Davidson-Beaver or Rao-Kupper ties (paired_likelihoods.stan).
 *
 * Model (paper Sec. 3.1, eq. binomial-model-llm, one score vector per judge):
 *   LLM judge k in 1..K has centered scores S[k] (S[k] 1 = 0), an order
 *   effect b_k (use_order = 1) and, with tie_model > 0, a tie parameter nu_k.
 *   For an LLM cell (k, i, j, a): eta = S[k, i] - S[k, j] + a b_k.
 *   People have their own centered scores s_H (when H > 0), no order effect
 *   (eq. binomial-model-human) and a tie parameter nu_H (tie_model > 0).
 *   With K = 0 and human cells only this is the human-only BTL (or Davidson
 *   / Rao-Kupper) model; pooled BTL: give every LLM cell judge 1, K = 1.
 *
 * Every parameter is identified (scores are centered through an orthonormal
 * basis, S[k] = (Q_N s_raw[k]')', s_H = Q_N sH_raw), so the same program
 * serves the log density, the MLE (optimizer) and NUTS.  Each cell's
 * log-likelihood (with its multinomial coefficient) is multiplied by a data
 * weight (1 = ordinary likelihood; 0 leaves the cell out).
 *
 * Priors (data; scale 0 = flat):
 *   s_raw, sH_raw ~ normal(0, prior_s_sd)   (= exchangeable normal on centered scores)
 *   b             ~ normal(0, prior_b_sd)
 *   log_nu        ~ normal(prior_log_nu_mean, prior_log_nu_sd)
 *
 * Jeffreys prior (Firth 1993; data flag firth = 1, binary cells only): adds
 * 1/2 log det of the Fisher information of (s_raw, sH_raw, b), block diagonal
 * over the judges and the people, so the mode is each judge's (and the
 * people's) bias-reduced estimate (firth.stan).
 *
 * How to extend.  Copy this file (keep `#include paired_likelihoods.stan` and
 * `#include bases.stan`), change the linear predictor or the per-cell tie
 * parameter in the model block and in generated quantities (both call
 * paired_eta and paired_log_lik), declare any new data after the shared
 * schema and pass it with pydial.stan.standata(..., extra={...}); fit with
 * pydial.stan.posterior(data, model="judges", program="my.stan").
 */
functions {
#include bases.stan
#include paired_likelihoods.stan
#include firth.stan
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

  real<lower=0> prior_s_sd;                          // prior sd of the score coordinates (0 = flat)
  real<lower=0> prior_b_sd;                          // prior sd of the order effects (0 = flat)
  real prior_log_nu_mean;                            // prior mean of the log tie parameters
  real<lower=0> prior_log_nu_sd;                     // prior sd of the log tie parameters (0 = flat)
  int<lower=0, upper=1> firth;                       // 1 = Jeffreys prior (Firth) on every judge's BTL and the people's
  real<lower=0> prior_kappa_sd;                      // EXTENSION: prior sd of kappa (extra data)
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
  }

  matrix[N, N - 1] Q_N = centered_basis(N);          // orthonormal basis of {x : 1' x = 0}
  int T = tie_model == 0 ? 0 : K + (H > 0);          // tie parameters: judges 1..K, then people
  // Firth: d eta / d (s_raw, sH_raw, b) per cell, LLM cells then human cells (zero-size when unused)
  int F_rows = firth ? C + H : 0;
  int F_cols = firth ? K * (N - 1) + (H > 0) * (N - 1) + use_order * K : 0;
  matrix[F_rows, F_cols] firth_X = rep_matrix(0, F_rows, F_cols);
  array[F_rows] int firth_n;
  if (firth) {
    if (tie_model > 0) reject("firth = 1 needs binary cells (tie_model = 0)");
    for (t in 1:C) {
      int k = cell_judge[t];
      firth_X[t, ((k - 1) * (N - 1) + 1):(k * (N - 1))] = Q_N[cell_i[t]] - Q_N[cell_j[t]];
      if (use_order) firth_X[t, K * (N - 1) + (H > 0) * (N - 1) + k] = cell_a[t];
      firth_n[t] = cell_counts[t, 1] + cell_counts[t, 2];
    }
    for (t in 1:H) {
      firth_X[C + t, (K * (N - 1) + 1):((K + 1) * (N - 1))] = Q_N[human_i[t]] - Q_N[human_j[t]];
      firth_n[C + t] = human_counts[t, 1] + human_counts[t, 2];
    }
  }
}
parameters {
  matrix[K, N - 1] s_raw;                            // judge scores in the coordinates of Q_N (row k = judge k)
  vector[H > 0 ? N - 1 : 0] sH_raw;                  // human scores in the coordinates of Q_N
  vector[use_order ? K : 0] b;                       // order effects
  vector[T] log_nu;                                  // log tie parameters
  real kappa;                                        // EXTENSION: decay of log nu with the squared score gap
}
transformed parameters {
  matrix[K, N] S = s_raw * Q_N';                     // centered judge scores, row k = judge k
  vector[N] s_H = H > 0 ? Q_N * sH_raw : rep_vector(0, N);   // centered human scores
}
model {
  vector[K] b_k = use_order ? b : rep_vector(0, K);
  vector[C] eta = paired_eta(S, cell_judge, cell_i, cell_j, cell_a, b_k);
  vector[H] eta_h = paired_eta(to_matrix(s_H'), human_judge, human_i, human_j, human_a, rep_vector(0, 1));
  vector[C] log_nu_c = (T > 0 ? log_nu[cell_judge] : rep_vector(0, C)) - kappa * square(eta);   // EXTENSION
  vector[H] log_nu_h = rep_vector(T > 0 ? log_nu[T] : 0, H) - kappa * square(eta_h);           // EXTENSION
  target += dot_product(cell_w, cell_log_coef + paired_log_lik(cell_counts, eta, tie_model, log_nu_c));
  target += dot_product(human_w, human_log_coef + paired_log_lik(human_counts, eta_h, tie_model, log_nu_h));
  if (firth) target += firth_penalty(firth_X, append_row(eta, eta_h), firth_n);
  if (prior_s_sd > 0) {
    target += normal_lpdf(to_vector(s_raw) | 0, prior_s_sd);
    target += normal_lpdf(sH_raw | 0, prior_s_sd);
  }
  if (prior_b_sd > 0) target += normal_lpdf(b | 0, prior_b_sd);
  if (prior_log_nu_sd > 0) target += normal_lpdf(log_nu | prior_log_nu_mean, prior_log_nu_sd);
  target += normal_lpdf(kappa | 0, prior_kappa_sd);                                            // EXTENSION
}
generated quantities {
  vector[T] nu = exp(log_nu);                        // tie parameters
  vector[calc_log_lik ? C + H : 0] log_lik;          // log p(counts) per cell (LLM cells, then human)
  array[calc_log_lik ? C + H : 0, 3] int counts_rep; // replicated counts per cell (posterior predictive)
  if (calc_log_lik) {
    vector[K] b_k = size(b) > 0 ? b : rep_vector(0, K);
    vector[C] eta = paired_eta(S, cell_judge, cell_i, cell_j, cell_a, b_k);
    vector[H] eta_h = paired_eta(to_matrix(s_H'), human_judge, human_i, human_j, human_a, rep_vector(0, 1));
    vector[C] log_nu_c = (T > 0 ? log_nu[cell_judge] : rep_vector(0, C)) - kappa * square(eta);   // EXTENSION
    vector[H] log_nu_h = rep_vector(T > 0 ? log_nu[T] : 0, H) - kappa * square(eta_h);           // EXTENSION
    log_lik[1:C] = cell_log_coef + paired_log_lik(cell_counts, eta, tie_model, log_nu_c);
    log_lik[(C + 1):(C + H)] = human_log_coef + paired_log_lik(human_counts, eta_h, tie_model, log_nu_h);
    counts_rep[1:C] = paired_rng(cell_counts, eta, tie_model, log_nu_c);
    counts_rep[(C + 1):(C + H)] = paired_rng(human_counts, eta_h, tie_model, log_nu_h);
  }
}
