/**
 * Judge-specific order-effect Bradley-Terry-Luce model, unstructured, with
 * optional Davidson-Beaver or Rao-Kupper ties (paired_likelihoods.stan).
 *
 * Model (paper Sec. 3.1, eq. binomial-model-llm, one score vector per judge):
 *   LLM judge k in 1..K has centered scores S[k] (S[k] 1 = 0), an order
 *   effect b_k (order = 1) and, with ties > 0, a tie parameter nu_k.
 *   For an LLM cell (k, i, j, a): eta = S[k, i] - S[k, j] + a b_k.
 *   People have their own centered scores s_H (when H > 0), no order effect
 *   (eq. binomial-model-human) and a tie parameter nu_H (ties > 0).
 *   Response covariates (n_cov > 0): eta += z' beta_g for a cell of group g
 *   (row beta_row[g] of beta; each judge's and the people's own effects).
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
 *   beta          ~ normal(0, prior_beta_sd)
 *   log_nu        ~ normal(prior_log_nu_mean, prior_log_nu_sd)
 *
 * Jeffreys prior (Firth 1993; data firth = 1, codes as in firth.stan): adds
 * 1/2 log det of the Fisher information of (s_raw, sH_raw, b), and of the free
 * log_nu with ties > 0, block diagonal over the judges and the people, so the
 * mode is each judge's (and the people's) bias-reduced estimate.
 *
 * Layout.  Every block includes the shared pieces (schema_*.stan: the data
 * and its checks; cell_*.stan: the cell likelihood) and this program's own
 * (judges_*.stan), all in stan/include.
 *
 * How to extend (add, do not copy; README "Extending a Stan program";
 * pydial.stan.example_program("tie_gap") is such a program).  Write a
 * program with these blocks and #include lines and add: data after
 * `#include judges_data.stan` (pass it with pydial.stan.standata(...,
 * extra={...}) or pydial.posterior(..., extra={...})), parameters after
 * `#include judges_parameters.stan`, their priors after
 * `#include judges_model.stan`, functions in `functions { }`, and an offset
 * to eta or log_nu_cell after each `#include cell_inputs.stan` (model block
 * and generated quantities alike).  Sample it with
 * pydial.posterior(data, "judges", program="my.stan", extra={...}).
 */
functions {
#include bases.stan
#include paired_likelihoods.stan
#include firth.stan
}
data {
#include schema_data.stan
#include judges_data.stan
}
transformed data {
#include schema_tdata.stan
#include judges_tdata.stan
}
parameters {
#include judges_parameters.stan
}
transformed parameters {
#include judges_tparameters.stan
}
model {
#include cell_inputs.stan
#include cell_target.stan
#include judges_model.stan
}
generated quantities {
#include judges_generated.stan
  vector[calc_log_lik ? n_cells : 0] log_lik;            // log p(counts) per cell (LLM cells, then human)
  array[calc_log_lik ? n_cells : 0, 3] int counts_rep;   // replicated counts per cell (posterior predictive)
  if (calc_log_lik) {
#include cell_inputs.stan
#include cell_outputs.stan
  }
}
