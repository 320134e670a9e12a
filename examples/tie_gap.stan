/**
 * judges.stan plus a tie rate that depends on the score gap (lines marked
 * EXTENSION; everything else is judges.stan's #include lines).  A cell's log
 * tie parameter is
 *   log nu_k - kappa * eta^2,   eta = S[k, i] - S[k, j] + a b_k,
 * so ties become rarer (kappa > 0) or more frequent (kappa < 0) as the gap
 * grows, beyond the dependence that the Davidson model already has
 * (P(tie) = nu / (e^{eta/2} + e^{-eta/2} + nu)).  kappa = 0 is judges.stan.
 * Fitted and compared with judges.stan in examples/tie_gap.py.
 */
functions {
#include bases.stan
#include paired_likelihoods.stan
#include firth.stan
}
data {
#include schema_data.stan
#include judges_data.stan
  real<lower=0> prior_kappa_sd;                      // EXTENSION: prior sd of kappa (extra data)
}
transformed data {
#include schema_tdata.stan
#include judges_tdata.stan
}
parameters {
#include judges_parameters.stan
  real kappa;                                        // EXTENSION: decay of log nu with the squared score gap
}
transformed parameters {
#include judges_tparameters.stan
}
model {
#include cell_inputs.stan
  log_nu_cell -= kappa * square(eta);                // EXTENSION
#include cell_target.stan
#include judges_model.stan
  target += normal_lpdf(kappa | 0, prior_kappa_sd);  // EXTENSION
}
generated quantities {
#include judges_generated.stan
  vector[calc_log_lik ? n_cells : 0] log_lik;            // log p(counts) per cell (LLM cells, then human)
  array[calc_log_lik ? n_cells : 0, 3] int counts_rep;   // replicated counts per cell (posterior predictive)
  if (calc_log_lik) {
#include cell_inputs.stan
    log_nu_cell -= kappa * square(eta);              // EXTENSION
#include cell_outputs.stan
  }
}
