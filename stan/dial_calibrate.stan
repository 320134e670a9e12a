/**
 * DIAL-Anc, second stage of the cut posterior: the human calibration
 * coordinates c given T draws of the LLM calibration basis M.
 *
 * The anchored estimator (lambda = infinity, eq. staged-calibrated-estimator)
 * estimates the LLM structure from the LLM judgments alone and then the
 * calibration s_H = M c from the human judgments with M held fixed.  Its
 * Bayesian counterpart is the cut posterior: M from the LLM-only posterior
 * (dial_sample.stan with calibration = 0), then c | M, human data.  This
 * program samples T independent calibrations at once, one per draw M_t of
 * the first stage (the target is the product of the T posteriors):
 *
 *   human cell (i, j):  wins_i ~ Binomial(wins_i + wins_j, inv_logit(s_t[i] - s_t[j])),
 *                       s_t = M_t c_t  (binary; Davidson or Rao-Kupper with a
 *                       tie parameter nu_t when tie_model > 0)
 *   c_t     ~ normal(0, prior_c_sd)       (0 = flat)
 *   log nu_t ~ normal(prior_log_nu_mean, prior_log_nu_sd)
 *
 * Each factor is a d-dimensional logistic regression (d = 1 for M = mu,
 * r + 1 for M = W), log-concave in c_t.  The model block is vectorized over
 * (t, h); pydial starts every c_t at its conditional mode (Newton in numpy).  The human cells and weights follow
 * the shared schema (pydial.stan.standata); log_lik and counts_rep are
 * written per (draw t, human cell).
 */
functions {
#include paired_likelihoods.stan
}
data {
  int<lower=2> N;                                    // number of items
  int<lower=1> T;                                    // number of first-stage draws of M
  int<lower=1> d;                                    // calibration dimension
  array[T] matrix[N, d] M;                           // calibration basis per draw (N^{-1} M' M = I)
  int<lower=0, upper=2> tie_model;                   // 0 binary, 1 Davidson, 2 Rao-Kupper

  int<lower=1> H;                                    // number of human cells (i, j)
  array[H] int<lower=1, upper=N> human_i;            // canonical item i (i < j)
  array[H] int<lower=1, upper=N> human_j;            // canonical item j
  array[H, 3] int<lower=0> human_counts;             // (wins of item i, wins of item j, ties)
  vector<lower=0>[H] human_w;                        // weight of the cell's log-likelihood
  int<lower=0, upper=1> calc_log_lik;                // 1 = write log_lik and counts_rep per (t, cell)

  real<lower=0> prior_c_sd;                          // prior sd of c (0 = flat)
  real prior_log_nu_mean;                            // prior mean of log nu
  real<lower=0> prior_log_nu_sd;                     // prior sd of log nu (0 = flat)
}
transformed data {
  vector[H] human_log_coef = paired_log_coef(human_counts);
  array[H] int human_judge = rep_array(1, H);
  array[H] int human_a = rep_array(0, H);
  for (h in 1:H) {
    if (tie_model == 0 && human_counts[h, 3] > 0) reject("human cell ", h, " has ties but tie_model = 0");
  }
  // the linear predictor is linear in c: eta[t, h] = sum_k c[t, k] X[k][t, h] with
  // X[k][t, h] = M_t[i_h, k] - M_t[j_h, k], so the model block needs no loop over t
  array[d] matrix[T, H] X;
  for (k in 1:d) {
    for (t in 1:T) {
      for (h in 1:H) X[k][t, h] = M[t][human_i[h], k] - M[t][human_j[h], k];
    }
  }
  matrix[T, H] X1 = X[1];
  // (t, h) flattened column-major (t fastest), as to_vector(matrix[T, H]) orders them
  array[T * H] int y_flat;                           // wins of i
  array[T * H] int n_flat;                           // decisive judgments
  for (h in 1:H) {
    for (t in 1:T) {
      y_flat[(h - 1) * T + t] = human_counts[h, 1];
      n_flat[(h - 1) * T + t] = human_counts[h, 1] + human_counts[h, 2];
    }
  }
  int unit_w = min(human_w) == 1 && max(human_w) == 1;   // all weights 1: one vectorized binomial
}
parameters {
  matrix[T, d] c;                                    // calibration coordinates, row t for draw t
  vector[tie_model > 0 ? T : 0] log_nu;              // people's tie parameter, per draw
}
model {
  matrix[T, H] eta = diag_pre_multiply(col(c, 1), X1);
  for (k in 2:d) eta += diag_pre_multiply(col(c, k), X[k]);
  if (tie_model == 0 && unit_w) {
    // paired_log_lik's binary kernel summed over (t, h), as one vectorized binomial; the
    // binomial coefficients are constants and are dropped (_lupmf): this program is only sampled
    target += binomial_logit_lupmf(y_flat | n_flat, to_vector(eta));
  } else {
    for (t in 1:T) {
      vector[H] lnu = rep_vector(tie_model > 0 ? log_nu[t] : 0, H);
      target += dot_product(human_w, paired_log_lik(human_counts, eta[t]', tie_model, lnu));
    }
  }
  if (prior_c_sd > 0) target += normal_lpdf(to_vector(c) | 0, prior_c_sd);
  if (prior_log_nu_sd > 0) target += normal_lpdf(log_nu | prior_log_nu_mean, prior_log_nu_sd);
}
generated quantities {
  matrix[T, N] s_H;                                  // s_H[t] = (M_t c_t)'
  vector[tie_model > 0 ? T : 0] nu = exp(log_nu);
  matrix[calc_log_lik ? T : 0, H] log_lik;
  array[calc_log_lik ? T : 0, H, 3] int counts_rep;
  for (t in 1:T) s_H[t] = (M[t] * c[t]')';
  if (calc_log_lik) {
    for (t in 1:T) {
      vector[H] eta = paired_eta(s_H[t:t], human_judge, human_i, human_j, human_a, rep_vector(0, 1));
      vector[H] lnu = rep_vector(tie_model > 0 ? log_nu[t] : 0, H);
      log_lik[t] = (human_log_coef + paired_log_lik(human_counts, eta, tie_model, lnu))';
      counts_rep[t] = paired_rng(human_counts, eta, tie_model, lnu);
    }
  }
}
