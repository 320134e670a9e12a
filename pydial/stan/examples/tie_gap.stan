/**
 * judges.stan plus a tie rate that depends on the score gap (lines marked
 * EXTENSION; everything else is judges.stan's #include lines).  A cell of
 * group g (LLM judge g = 1..K, the people g = K + 1) has the log tie parameter
 *   log nu_g - kappa_g * eta^2,   eta = S[g, i] - S[g, j] + a b_g,
 * so ties become rarer (kappa_g > 0) or more frequent (kappa_g < 0) as the
 * gap grows, beyond the dependence that the Davidson model already has
 * (P(tie) = nu / (e^{eta/2} + e^{-eta/2} + nu)).  kappa = 0 is judges.stan.
 * Compared with judges.stan by `python -m pydial.stan.examples.tie_gap`;
 * pydial.stan.example_program("tie_gap") is the path of this file.
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
  vector[K + 1] kappa;                               // EXTENSION: decay of log nu with the squared gap (judges, people)
}
transformed parameters {
#include judges_tparameters.stan
}
model {
#include cell_inputs.stan
  log_nu_cell -= kappa[all_judge] .* square(eta);    // EXTENSION
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
    log_nu_cell -= kappa[all_judge] .* square(eta);  // EXTENSION
#include cell_outputs.stan
  }
}
