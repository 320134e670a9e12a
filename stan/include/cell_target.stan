  // ---- the weighted log-likelihood of every cell, multinomial coefficient included (cell_target.stan)
  target += paired_target(all_w, all_counts, all_log_coef, eta, ties, log_nu_cell);
