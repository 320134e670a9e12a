  // ---- dial.stan's constants and checks (dial_tdata.stan, after schema_tdata.stan)
  int q = rank + 1;                                  // columns of A and B
  int d = calibration == 0 ? 0 : (calibration == 1 ? 1 : q);   // calibration dimension
  if (K < 1) reject("dial.stan needs K >= 1 LLM judges");
  if (rank > K - 1 || q > N - 1) {
    reject("rank r = ", rank, " needs r <= K - 1 = ", K - 1, " and r + 1 <= N - 1 = ", N - 1,
           " (r is the disagreement rank of the structured LLM model)");
  }
  if (calibration == 0 && H > 0) reject("human cells need a calibration basis (calibration = 1 or 2)");
  if (fix_llm && C > 0) reject("fix_llm = 1 fits the calibration alone: pass C = 0 LLM cells");
  if (fix_llm && ties > 0) {                         // the judges are data: only the people's tie parameter
    n_nu = H > 0;
    nu_index = rep_array(0, K + 1);
    nu_index[K + 1] = H > 0 && !nu_zero[K + 1] ? n_nu : 0;
  }
  // the people's covariates with an effect (not fixed at 0): the columns Z_H of the calibration GLM
  int n_human_cov = 0;
  if (n_cov > 0 && beta_row[K + 1] > 0) {
    for (u in 1:n_cov) n_human_cov += 1 - beta_fixed[beta_row[K + 1], u];
  }
  array[n_human_cov] int human_cov;
  if (n_human_cov > 0) {
    int v = 0;
    for (u in 1:n_cov) {
      if (!beta_fixed[beta_row[K + 1], u]) {
        v += 1;
        human_cov[v] = u;
      }
    }
  }
  // Firth designs (zero-size when unused); T_N: s = T_N s[1:(N-1)] for centered s
  array[C] int cell_n;                               // decisive comparisons per cell
  array[H] int human_n;
  for (t in 1:C) cell_n[t] = cell_counts[t, 1] + cell_counts[t, 2];
  for (t in 1:H) human_n[t] = human_counts[t, 1] + human_counts[t, 2];
  matrix[N, N - 1] T_N = append_row(diag_matrix(rep_vector(1, N - 1)), rep_row_vector(-1, N - 1));
  matrix[firth == 1 ? C : 0, firth == 1 ? N - 1 + order + n_beta_free : 0] firth_X;
  matrix[firth == 2 ? H : 0, N] firth_D = difference_design(human_i[1:(firth == 2 ? H : 0)],
                                                            human_j[1:(firth == 2 ? H : 0)], N);
  if (firth == 1) {
    if (K != 1 || rank != 0 || fix_llm) reject("firth = 1 needs K = 1, r = 0 and fix_llm = 0 (one binomial GLM)");
    firth_X[:, 1:(N - 1)] = difference_design(cell_i, cell_j, N) * T_N;
    if (order) firth_X[:, N] = to_vector(cell_a);
    for (u in 1:n_cov) {                             // the one judge's free covariate effects
      if (beta_pos[1, u] > 0) firth_X[:, N - 1 + order + beta_pos[1, u]] = cell_z[:, u];
    }
  }
  // with ties (tie_firth_penalty): comparisons per cell, ties included, and the free tie parameter's column
  array[C] int cell_total;
  array[H] int human_total;
  for (t in 1:C) cell_total[t] = sum(cell_counts[t]);
  for (t in 1:H) human_total[t] = sum(human_counts[t]);
  matrix[firth == 1 ? C : 0, firth == 1 && ties > 0 && nu_index[1] > 0] firth_E1 = rep_matrix(1, firth == 1 ? C : 0,
                                                                                          firth == 1 && ties > 0 && nu_index[1] > 0);
  matrix[firth == 2 ? H : 0, firth == 2 && ties > 0 && nu_index[K + 1] > 0] firth_E2
    = rep_matrix(1, firth == 2 ? H : 0, firth == 2 && ties > 0 && nu_index[K + 1] > 0);
