  // ---- judges.stan's terms besides the cell likelihood (judges_model.stan, after cell_inputs.stan)
  // Jeffreys prior of each judge's BTL (of its tie model with ties > 0)
  if (firth && ties == 0) target += firth_penalty(firth_X, eta, firth_n);
  if (firth && ties > 0) target += tie_firth_penalty(firth_X, firth_E, eta, log_nu_cell, firth_n, ties);
  // priors; scale 0 = flat
  if (prior_s_sd > 0) {
    target += normal_lpdf(to_vector(s_raw) | 0, prior_s_sd);
    target += normal_lpdf(sH_raw | 0, prior_s_sd);
  }
  if (prior_b_sd > 0) target += normal_lpdf(b | 0, prior_b_sd);
  if (prior_beta_sd > 0) target += normal_lpdf(beta_free | 0, prior_beta_sd);
  if (prior_log_nu_sd > 0) target += normal_lpdf(log_nu | prior_log_nu_mean, prior_log_nu_sd);
