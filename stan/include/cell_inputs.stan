  // ---- inputs of every cell (cell_inputs.stan): LLM cells, then human cells (the people are row K + 1
  // of the scores, without order effect); needs S (K x N), s_H (N), b (K or empty), the covariate
  // effects beta (covariate_parameters.stan) and log_nu (n_nu).
  // Add an offset here, before cell_target.stan / cell_outputs.stan: eta += ..., log_nu_cell += ...
  vector[n_cells] eta = paired_eta(append_row(S, s_H'), b, all_judge, all_i, all_j, all_a);
  if (n_cov > 0) eta += paired_offset(all_z, beta, all_beta_row);
  vector[n_cells] log_nu_cell = paired_log_nu(log_nu, nu_index, all_judge);
