  // ---- checks and the cell table of the shared schema (schema_tdata.stan, after schema_data.stan)
  for (t in 1:C) {
    if (ties == 0 && cell_counts[t, 3] > 0) reject("LLM cell ", t, " has ties but ties = 0 (binary)");
    if (ties > 0 && nu_zero[cell_judge[t]] && cell_counts[t, 3] > 0) reject("LLM cell ", t, " has ties but nu_zero");
  }
  for (t in 1:H) {
    if (ties == 0 && human_counts[t, 3] > 0) reject("human cell ", t, " has ties but ties = 0 (binary)");
    if (ties > 0 && nu_zero[K + 1] && human_counts[t, 3] > 0) reject("human cell ", t, " has ties but nu_zero");
  }
  // every cell once, LLM cells then human cells (the order of log_lik); the people are judge K + 1
  int n_cells = C + H;
  array[n_cells] int all_judge = append_array(cell_judge, rep_array(K + 1, H));
  array[n_cells] int all_i = append_array(cell_i, human_i);
  array[n_cells] int all_j = append_array(cell_j, human_j);
  array[n_cells] int all_a = append_array(cell_a, rep_array(0, H));   // people: no order effect
  array[n_cells, 3] int all_counts = append_array(cell_counts, human_counts);
  vector[n_cells] all_w = append_row(cell_w, human_w);
  vector[n_cells] all_log_coef = paired_log_coef(all_counts);
  // tie parameters (ties > 0): log_nu[k] of LLM judge k, then the people's (when H > 0) as the last
  // entry; nu_index[g] = the entry of group g (K + 1 = people), 0 = none: nu = 0, binary cells.  An
  // entry of a nu_zero group is in log_nu but unused (flat; for point fits at the boundary nu = 0).
  int n_nu = ties == 0 ? 0 : K + (H > 0);            // number of tie parameters
  array[K + 1] int nu_index = rep_array(0, K + 1);
  if (ties > 0) {
    for (k in 1:K) nu_index[k] = nu_zero[k] ? 0 : k;
    nu_index[K + 1] = H > 0 && !nu_zero[K + 1] ? n_nu : 0;
  }
  // covariates (n_cov > 0): every cell's z and the row of beta of its group (cell_inputs.stan adds z' beta
  // to eta); rows 1..n_beta of beta are the effects of the groups that have one (beta_row); beta_free holds
  // the entries not fixed at 0, row-major (beta_pos: their position, 0 = fixed)
  if (n_beta != (n_cov == 0 ? 0 : max(beta_row))) reject("n_beta = ", n_beta, " must be max(beta_row) (0 when n_cov = 0)");
  int n_beta_free = 0;
  array[n_beta, n_cov] int beta_pos;
  for (g in 1:n_beta) {
    for (t in 1:n_cov) {
      n_beta_free += 1 - beta_fixed[g, t];
      beta_pos[g, t] = beta_fixed[g, t] ? 0 : n_beta_free;
    }
  }
  matrix[n_cells, n_cov] all_z = append_row(cell_z, human_z);
  array[n_cells] int all_beta_row = rep_array(0, n_cells);
  if (n_cov > 0) {
    for (t in 1:n_cells) {
      all_beta_row[t] = beta_row[all_judge[t]];
      if (all_beta_row[t] == 0) reject("cell ", t, " has covariates but its group ", all_judge[t], " has beta_row = 0");
    }
  }
