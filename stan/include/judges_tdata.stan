  // ---- judges.stan's constants (judges_tdata.stan, after schema_tdata.stan)
  matrix[N, N - 1] Q_N = centered_basis(N);          // orthonormal basis of {x : 1' x = 0}
  if (firth == 2) reject("judges.stan has no calibration block: firth must be 0 or 1");
  // Firth: d eta / d (s_raw, sH_raw, b, beta) per cell, every cell (zero-size when unused); the
  // people (judge K + 1) have the score block after the judges' and no order effect
  int F_rows = firth ? n_cells : 0;
  int F_cols = firth ? (K + (H > 0)) * (N - 1) + order * K + n_beta_free : 0;
  matrix[F_rows, F_cols] firth_X = rep_matrix(0, F_rows, F_cols);
  array[F_rows] int firth_n;
  for (t in 1:F_rows) {
    int k = all_judge[t];
    firth_X[t, ((k - 1) * (N - 1) + 1):(k * (N - 1))] = Q_N[all_i[t]] - Q_N[all_j[t]];
    if (order && all_a[t] != 0) firth_X[t, (K + (H > 0)) * (N - 1) + k] = all_a[t];
    for (u in 1:n_cov) {                             // the free covariate effects of the cell's row of beta
      int pos = beta_pos[all_beta_row[t], u];
      if (pos > 0) firth_X[t, (K + (H > 0)) * (N - 1) + order * K + pos] = all_z[t, u];
    }
    firth_n[t] = sum(all_counts[t]);
  }
  // with ties: the free tie parameters' columns (tie_firth_penalty), one per group without nu_zero
  int F_free = 0;
  array[K + 1] int firth_col = rep_array(0, K + 1);
  if (firth && ties > 0) {
    for (g in 1:(K + 1)) {
      if (nu_index[g] > 0) {
        F_free += 1;
        firth_col[g] = F_free;
      }
    }
  }
  matrix[F_rows, F_free] firth_E = rep_matrix(0, F_rows, F_free);
  for (t in 1:F_rows) {
    if (firth_col[all_judge[t]] > 0) firth_E[t, firth_col[all_judge[t]]] = 1;
  }
