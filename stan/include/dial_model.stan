  // ---- dial.stan's terms besides the cell likelihood (dial_model.stan, after cell_inputs.stan)
  // Jeffreys prior (firth.stan): 1 = the LLM cells' GLM, 2 = the human calibration GLM [D_H M, Z_H], basis
  // normalized (of the tie model in (beta, log nu) with ties > 0)
  if (firth == 1 && ties == 0) target += firth_penalty(firth_X, eta[1:C], cell_n);
  if (firth == 1 && ties > 0) target += tie_firth_penalty(firth_X, firth_E1, eta[1:C], log_nu_cell[1:C], cell_total, ties);
  if (firth == 2 && H > 0 && ties == 0) {
    target += firth_penalty(append_col(firth_D * B[:, 1:d], human_z[:, human_cov]), eta[(C + 1):n_cells], human_n)
              - 0.5 * log_determinant(crossprod(B[:, 1:d]));
  }
  if (firth == 2 && H > 0 && ties > 0) {
    target += tie_firth_penalty(append_col(firth_D * B[:, 1:d], human_z[:, human_cov]), firth_E2, eta[(C + 1):n_cells], log_nu_cell[(C + 1):n_cells],
                                human_total, ties) - 0.5 * log_determinant(crossprod(B[:, 1:d]));
  }
  // normal penalties of the penalized MLE; scale 0 = flat
  if (prior_A_sd > 0) target += normal_lpdf(A_free | 0, prior_A_sd);
  if (prior_B_sd > 0) target += normal_lpdf(B_free | 0, prior_B_sd);
  if (prior_c_sd > 0) target += normal_lpdf(c | 0, prior_c_sd);
  if (prior_b_sd > 0) target += normal_lpdf(b | 0, prior_b_sd);
  if (prior_beta_sd > 0) target += normal_lpdf(beta_free | 0, prior_beta_sd);
  if (prior_log_nu_sd > 0) target += normal_lpdf(log_nu | prior_log_nu_mean, prior_log_nu_sd);
