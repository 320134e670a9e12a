  // ---- judges.stan's parameters (judges_parameters.stan)
  matrix[K, N - 1] s_raw;                            // judge scores in the coordinates of Q_N (row k = judge k)
  vector[H > 0 ? N - 1 : 0] sH_raw;                  // human scores in the coordinates of Q_N
  vector[order ? K : 0] b;                           // order effects
#include covariate_parameters.stan
  vector[n_nu] log_nu;                               // log tie parameters (judges 1..K, then people)
