  // ---- the covariate effects of every program (covariate_parameters.stan; empty when n_cov = 0)
  vector[n_beta_free] beta_free;                     // the free entries of beta, row-major (covariate_tparameters.stan)
