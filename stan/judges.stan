/**
 * Judge-specific order-effect Bradley-Terry-Luce model, unstructured, with
 * optional Davidson-Beaver ties.
 *
 * Model (paper Sec. 3.1, eq. binomial-model-llm, one score vector per judge):
 *   judge g in 1..G has centered scores s_g (1' s_g = 0), an optional order
 *   effect b_g and an optional tie parameter nu_g.  For a cell (g, i, j, a)
 *   with counts (wins_i, wins_j, ties) and x = (s_gi - s_gj + a b_g) / 2:
 *     no tie parameter:  wins_i ~ Binomial(wins_i + wins_j, inv_logit(2 x)),
 *                        i.e. logit P(i wins) = s_gi - s_gj + a b_g;
 *     tie parameter:     (wins_i, wins_j, ties) ~ Multinomial(softmax(x, -x, log nu_g)),
 *                        Davidson (1970) with the Davidson-Beaver (1977)
 *                        order effect: P(i wins) : P(j wins) : P(tie)
 *                        = theta_i delta^{a/2} : theta_j delta^{-a/2} : nu sqrt(theta_i theta_j)
 *                        with theta = exp(s) and delta = exp(b).  Given a
 *                        decisive outcome this is the binomial model above;
 *                        nu -> 0 removes the ties.
 *   People enter as one more judge with a = 0 and no order effect (eq.
 *   binomial-model-human; with a tie parameter, Davidson 1970).  With G = 1
 *   and the human cells only, this is the human-only BTL (or Davidson) model.
 *   Pooled BTL: give every LLM cell the same judge.
 *
 * Every parameter is identified (scores are centered through an orthonormal
 * basis, s_g = Q_N s_raw[g]), so the same program serves the log density,
 * the MLE (optimizer) and NUTS.  Each cell's log-likelihood is multiplied by
 * a data weight (1 = ordinary likelihood; 0 leaves the cell out).
 *
 * Priors (data; scale 0 = flat):
 *   s_raw  ~ normal(0, prior_s_sd)   (= exchangeable normal on centered s_g)
 *   b      ~ normal(0, prior_b_sd)
 *   log_nu ~ normal(prior_log_nu_mean, prior_log_nu_sd)
 *
 * Jeffreys prior (Firth 1993; data flag firth = 1, binary cells only): adds
 * 1/2 log det of the Fisher information of (s_raw, b), block diagonal over
 * judges, so the mode is each judge's bias-reduced estimate (firth.stan).
 */
functions {
#include bases.stan
#include paired_likelihoods.stan
#include firth.stan
}
data {
  int<lower=2> N;                                    // number of items
  int<lower=1> G;                                    // number of judges (LLM judges, people)

  int<lower=0> C;                                    // number of cells (g, i, j, a)
  array[C] int<lower=1, upper=G> cell_judge;         // judge g of the cell
  array[C] int<lower=1, upper=N> cell_i;             // canonical item i (i < j)
  array[C] int<lower=1, upper=N> cell_j;             // canonical item j
  array[C] int<lower=-1, upper=1> cell_a;            // display order: +1 i first, -1 j first, 0 unknown (people)
  array[C, 3] int<lower=0> cell_counts;              // (wins of item i, wins of item j, ties)
  vector<lower=0>[C] cell_w;                         // likelihood weight of the cell

  int<lower=0> P;                                    // number of order-effect parameters
  array[G] int<lower=0, upper=P> judge_order;        // order effect of judge g in b (0 = none)
  int<lower=0> T;                                    // number of tie parameters
  array[G] int<lower=0, upper=T> judge_tie;          // tie parameter of judge g in log_nu (0 = no ties)

  real<lower=0> prior_s_sd;                          // prior sd of the score coordinates (0 = flat)
  real<lower=0> prior_b_sd;                          // prior sd of the order effects (0 = flat)
  real prior_log_nu_mean;                            // prior mean of the log tie parameters
  real<lower=0> prior_log_nu_sd;                     // prior sd of the log tie parameters (0 = flat)

  int<lower=0, upper=1> calc_log_lik;                // 1 = write log_lik per cell
  int<lower=0, upper=1> firth;                       // 1 = Jeffreys prior (Firth) on every judge's BTL
}
transformed data {
  matrix[N, N - 1] Q_N = centered_basis(N);          // orthonormal basis of {x : 1' x = 0}
  // Firth: d eta / d (s_raw, b) per cell, eta = s_gi - s_gj + a b_g (zero-size when unused)
  matrix[firth ? C : 0, firth ? G * (N - 1) + P : 0] firth_X = rep_matrix(0, firth ? C : 0, firth ? G * (N - 1) + P : 0);
  array[firth ? C : 0] int firth_n;
  if (firth) {
    if (T > 0) reject("firth = 1 needs binary cells (no tie parameters)");
    for (t in 1:C) {
      int g = cell_judge[t];
      firth_X[t, ((g - 1) * (N - 1) + 1):(g * (N - 1))] = Q_N[cell_i[t]] - Q_N[cell_j[t]];
      if (judge_order[g] > 0) firth_X[t, G * (N - 1) + judge_order[g]] = cell_a[t];
      firth_n[t] = cell_counts[t, 1] + cell_counts[t, 2];
    }
  }
}
parameters {
  array[G] vector[N - 1] s_raw;                      // judge scores in the coordinates of Q_N
  vector[P] b;                                       // order effects
  vector[T] log_nu;                                  // log tie parameters
}
transformed parameters {
  matrix[G, N] s;                                    // centered judge scores, row g = s_g
  for (g in 1:G) {
    s[g] = (Q_N * s_raw[g])';
  }
}
model {
  // per-judge order effect and log tie parameter (0 where absent)
  vector[G] b_g = rep_vector(0, G);
  vector[G] log_nu_g = rep_vector(0, G);
  for (g in 1:G) {
    if (judge_order[g] > 0) b_g[g] = b[judge_order[g]];
    if (judge_tie[g] > 0) log_nu_g[g] = log_nu[judge_tie[g]];
  }
  for (t in 1:C) {
    int g = cell_judge[t];
    real x = 0.5 * (s[g, cell_i[t]] - s[g, cell_j[t]] + cell_a[t] * b_g[g]);
    target += cell_w[t] * paired_cell_lpmf(cell_counts[t] | x, judge_tie[g] > 0, log_nu_g[g]);
  }
  if (firth) {
    vector[C] eta_f;
    for (t in 1:C) {
      int g = cell_judge[t];
      eta_f[t] = s[g, cell_i[t]] - s[g, cell_j[t]] + cell_a[t] * b_g[g];
    }
    target += firth_penalty(firth_X, eta_f, firth_n);
  }
  if (prior_s_sd > 0) {
    for (g in 1:G) target += normal_lpdf(s_raw[g] | 0, prior_s_sd);
  }
  if (prior_b_sd > 0) target += normal_lpdf(b | 0, prior_b_sd);
  if (prior_log_nu_sd > 0) target += normal_lpdf(log_nu | prior_log_nu_mean, prior_log_nu_sd);
}
generated quantities {
  vector[T] nu = exp(log_nu);                        // tie parameters
  vector[calc_log_lik ? C : 0] log_lik;              // pointwise log-likelihood per cell
  if (calc_log_lik) {
    for (t in 1:C) {
      int g = cell_judge[t];
      real b_t = judge_order[g] > 0 ? b[judge_order[g]] : 0;
      real log_nu_t = judge_tie[g] > 0 ? log_nu[judge_tie[g]] : 0;
      real x = 0.5 * (s[g, cell_i[t]] - s[g, cell_j[t]] + cell_a[t] * b_t);
      log_lik[t] = paired_cell_lpmf(cell_counts[t] | x, judge_tie[g] > 0, log_nu_t);
    }
  }
}
