  // ---- judges.stan's transformed parameters (judges_tparameters.stan)
  matrix[K, N] S = s_raw * Q_N';                     // centered judge scores, row k = judge k
  vector[N] s_H = H > 0 ? Q_N * sH_raw : rep_vector(0, N);   // centered human scores
#include covariate_tparameters.stan
