  // ---- judges.stan's own generated quantities (judges_generated.stan)
  vector[n_nu] nu = exp(log_nu);                     // tie parameters
