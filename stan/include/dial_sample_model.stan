  // ---- dial_sample.stan's priors (dial_sample_model.stan, after cell_target.stan; scale 0 = flat)
  // parameter expansion of P: a density of P_raw' P_raw only (uniform frame P)
  target += -0.5 * sum(square(crossprod(P_raw) - identity_matrix(rank))) / square(frame_sd);
  if (prior_m_sd > 0) target += normal_lpdf(m_raw | 0, prior_m_sd);
  if (prior_gamma_sd > 0) target += normal_lpdf(gamma_dev | 0, prior_gamma_sd);
  if (prior_Z_sd > 0) target += normal_lpdf(to_vector(Z_raw) | 0, prior_Z_sd);
  if (prior_b_sd > 0) target += normal_lpdf(b | 0, prior_b_sd);
  if (prior_beta_sd > 0) target += normal_lpdf(beta_free | 0, prior_beta_sd);
  if (prior_c_sd > 0) target += normal_lpdf(c | 0, prior_c_sd);
  if (prior_log_nu_sd > 0) target += normal_lpdf(log_nu | prior_log_nu_mean, prior_log_nu_sd);
