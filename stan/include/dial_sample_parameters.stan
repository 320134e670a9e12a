  // ---- dial_sample.stan's parameters (dial_sample_parameters.stan)
  vector[N - 1] m_raw;                               // mean judge score S' 1 / K in the coordinates of Q_N
  matrix[N - 2, rank] Z_raw;                         // item side of U V' (coordinates of {1, mu}^perp)
  vector[K - 1] gamma_dev;                           // deviations of gamma from its mean (coordinates of Q_K)
  matrix[K - 1, rank] P_raw;                         // judge side of U V', parameter expansion (coordinates of Q_K)
  vector[order ? K : 0] b;                           // judge order effects b_k
#include covariate_parameters.stan
  vector[d] c;                                       // human calibration coordinates relative to M
  vector[n_nu] log_nu;                               // log tie parameters (judges 1..K, then people)
