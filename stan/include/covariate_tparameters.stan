  // ---- the covariate effects as rows (covariate_tparameters.stan): beta[beta_row[g]] of group g, 0 where fixed
  array[n_beta] vector[n_cov] beta;
  for (g in 1:n_beta) {
    for (t in 1:n_cov) beta[g, t] = beta_pos[g, t] > 0 ? beta_free[beta_pos[g, t]] : 0.0;
  }
