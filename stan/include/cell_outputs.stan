    // ---- per-cell log p(counts) and replicated counts from the same inputs (cell_outputs.stan)
    log_lik = paired_log_lik(all_counts, all_log_coef, eta, ties, log_nu_cell);
    counts_rep = paired_rng(all_counts, eta, ties, log_nu_cell);
