/**
 * DIAL-Anc, second stage of the cut posterior: the human calibration
 * coordinates c given n_draws draws of the LLM calibration basis M.
 *
 * The anchored estimator (lambda = infinity, eq. staged-calibrated-estimator)
 * estimates the LLM structure from the LLM judgments alone and then the
 * calibration s_H = M c from the human judgments with M held fixed.  Its
 * Bayesian counterpart is the cut posterior: M from the LLM-only posterior
 * (dial_sample.stan with calibration = 0), then c | M, human data.  This
 * program samples n_draws independent calibrations at once, one per draw M_t
 * of the first stage (the target is the product of the n_draws posteriors):
 *
 *   human cell (i, j) under draw t:  eta = s_t[i] - s_t[j] + z' beta_t,  s_t = M_t c_t,
 *       the cell likelihood of every program (paired_likelihoods.stan:
 *       binary, or Davidson / Rao-Kupper with a tie parameter nu_t per draw)
 *   c_t      ~ normal(0, prior_c_sd)       (0 = flat)
 *   beta_t   ~ normal(0, prior_beta_sd)    (the people's covariate effects, n_cov > 0)
 *   log nu_t ~ normal(prior_log_nu_mean, prior_log_nu_sd)
 *
 * Each factor is a (d + n_cov)-dimensional GLM (d = 1 for M = mu, r + 1 for M = W),
 * log-concave in c_t; pydial starts every c_t at its conditional mode (Newton
 * in numpy).  The data are the cells every program reads, with human cells
 * only (K = 0, C = 0), plus the draws of M; the human cells are repeated
 * once per draw (draw t = row t of the score matrix, its own entry of
 * log_nu), and the model block and generated quantities call the same
 * paired_eta, paired_log_nu, paired_target, paired_log_lik and paired_rng as
 * every program.  log_lik and counts_rep are written per (draw t, human
 * cell); the weights and the multinomial coefficients are those of every
 * program.
 *
 * Extending: copy this program (pydial.stan.program_code("dial_calibrate")),
 * add data at the end of the data block, parameters after c and log_nu
 * (their priors after the ones below), and an offset to eta or log_nu_cell
 * right after they are computed, in the model block and in generated
 * quantities alike.
 */
functions {
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
  // ---- this program's own data (pydial.stan.schema.dial_calibrate_data)
  int<lower=1> n_draws;                              // number of first-stage draws of M
  int<lower=1> d;                                    // calibration dimension
  array[n_draws] matrix[N, d] M;                     // calibration basis per draw (N^{-1} M' M = I)
  real<lower=0> prior_c_sd;                          // prior sd of c (0 = flat)
  real<lower=0> prior_beta_sd;                       // prior sd of the people's covariate effects (0 = flat)
  real prior_log_nu_mean;                            // prior mean of log nu
  real<lower=0> prior_log_nu_sd;                     // prior sd of log nu (0 = flat)
}
transformed data {
  if (K != 0 || C != 0 || H < 1) reject("dial_calibrate.stan reads human cells only: K = 0, C = 0, H >= 1");
  check_tie_counts(human_counts, rep_array(1, H), ties, nu_zero);
  int n_nu = ties == 0 ? 0 : 1;                      // the people's tie parameter, one per draw
  int people_nu = n_nu > 0 && !nu_zero[1];           // 0: nu = 0, binary cells
  // the human cells once per draw, (t, h) -> u = (h - 1) n_draws + t (column-major, as to_matrix)
  int n_rep = n_draws * H;
  array[n_rep] int rep_draw;                         // draw t: row t of the scores, entry t of log_nu
  array[n_rep] int rep_i;
  array[n_rep] int rep_j;
  array[n_rep] int rep_a = rep_array(0, n_rep);      // people: no order effect
  array[n_rep, 3] int rep_counts;
  vector[n_rep] rep_w;
  vector[n_rep] rep_log_coef;
  matrix[n_rep, n_cov] rep_z;                        // the cell's covariates; row of beta = its draw
  array[n_rep] int rep_beta_row = rep_array(0, n_rep);
  {
    vector[H] log_coef = paired_log_coef(human_counts);
    for (h in 1:H) {
      for (t in 1:n_draws) {
        int u = (h - 1) * n_draws + t;
        rep_draw[u] = t;
        rep_i[u] = human_i[h];
        rep_j[u] = human_j[h];
        rep_counts[u] = human_counts[h];
        rep_w[u] = human_w[h];
        rep_log_coef[u] = log_coef[h];
        if (n_cov > 0) {
          rep_z[u] = human_z[h];
          rep_beta_row[u] = t;
        }
      }
    }
  }
  // the design of eta = X to_vector(s_draw) (paired_design: draw t is row t of the scores)
  tuple(vector[3 * n_rep], array[3 * n_rep] int, array[n_rep + 1] int) X
    = paired_design(n_draws, N, rep_draw, rep_i, rep_j, rep_a, 0);
  matrix[n_rep, 3] rep_w_counts = diag_pre_multiply(rep_w, to_matrix(rep_counts));   // the target's weighted counts
  real rep_w_log_coef = dot_product(rep_w, rep_log_coef);
  array[n_draws] int draw_nu_index;                  // entry of log_nu of draw t (0: binary cells)
  for (t in 1:n_draws) draw_nu_index[t] = people_nu ? t : 0;
}
parameters {
  matrix[n_draws, d] c;                              // calibration coordinates, row t for draw t
  vector[n_nu > 0 ? n_draws : 0] log_nu;             // people's log tie parameter, per draw
  array[n_cov > 0 ? n_draws : 0] vector[n_cov] beta;         // people's covariate effects, beta[t] for draw t
}
model {
  matrix[n_draws, N] s_draw;                         // row t: s_t' = (M_t c_t)'
  for (t in 1:n_draws) s_draw[t] = (M[t] * c[t]')';
  vector[n_rep] eta = paired_eta(s_draw, rep_vector(0, 0), X)
                     + paired_offset(rep_z, beta, rep_beta_row);
  vector[ties > 0 ? n_rep : 0] log_nu_cell;          // none in the binary family (paired_target ignores it)
  if (ties > 0) log_nu_cell = paired_log_nu(log_nu, draw_nu_index, rep_draw);
  target += paired_target(rep_w_counts, rep_w_log_coef, eta, ties, log_nu_cell);
  if (prior_c_sd > 0) target += normal_lpdf(to_vector(c) | 0, prior_c_sd);
  if (prior_log_nu_sd > 0) target += normal_lpdf(log_nu | prior_log_nu_mean, prior_log_nu_sd);
  if (prior_beta_sd > 0) for (t in 1:size(beta)) target += normal_lpdf(beta[t] | 0, prior_beta_sd);
}
generated quantities {
  matrix[n_draws, N] s_H;                            // s_H[t] = (M_t c_t)'
  vector[n_nu > 0 ? n_draws : 0] nu = exp(log_nu);
  matrix[calc_log_lik ? n_draws : 0, H] log_lik;     // log p(counts) per (draw, human cell)
  array[calc_log_lik ? n_draws : 0, H, 3] int counts_rep;
  for (t in 1:n_draws) s_H[t] = (M[t] * c[t]')';
  if (calc_log_lik) {
    vector[n_rep] eta = paired_eta(s_H, rep_vector(0, 0), X)
                       + paired_offset(rep_z, beta, rep_beta_row);
    vector[n_rep] log_nu_cell = paired_log_nu(log_nu, draw_nu_index, rep_draw);
    array[n_rep, 3] int rep = paired_rng(rep_counts, eta, ties, log_nu_cell);
    log_lik = to_matrix(paired_log_lik(rep_counts, rep_log_coef, eta, ties, log_nu_cell), n_draws, H);
    for (h in 1:H) {
      for (t in 1:n_draws) counts_rep[t, h] = rep[(h - 1) * n_draws + t];
    }
  }
}
