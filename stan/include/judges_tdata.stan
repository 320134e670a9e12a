  // ---- judges.stan's constants (judges_tdata.stan, after schema_tdata.stan)
  matrix[N, N - 1] Q_N = centered_basis(N);          // orthonormal basis of {x : 1' x = 0}
  if (firth == 2) reject("judges.stan has no calibration block: firth must be 0 or 1");
  if (firth > 0 && ties > 0) reject("firth > 0 needs binary cells (ties = 0)");
  // Firth: d eta / d (s_raw, sH_raw, b) per cell, every cell (zero-size when unused); the
  // people (judge K + 1) have the score block after the judges' and no order effect
  int F_rows = firth ? n_cells : 0;
  int F_cols = firth ? (K + (H > 0)) * (N - 1) + order * K : 0;
  matrix[F_rows, F_cols] firth_X = rep_matrix(0, F_rows, F_cols);
  array[F_rows] int firth_n;
  for (t in 1:F_rows) {
    int k = all_judge[t];
    firth_X[t, ((k - 1) * (N - 1) + 1):(k * (N - 1))] = Q_N[all_i[t]] - Q_N[all_j[t]];
    if (order && all_a[t] != 0) firth_X[t, (K + (H > 0)) * (N - 1) + k] = all_a[t];
    firth_n[t] = all_counts[t, 1] + all_counts[t, 2];
  }
