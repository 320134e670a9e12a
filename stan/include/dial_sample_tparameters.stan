  // ---- dial_sample.stan's transformed parameters (dial_sample_tparameters.stan)
  real consensus_scale = sqrt(dot_self(m_raw) / N); // gamma_bar = 1' gamma / K > 0
  vector[N] mu = (Q_N * m_raw) / consensus_scale;    // consensus direction, 1' mu = 0, ||mu||^2 = N
  vector[K] gamma = consensus_scale + Q_K * gamma_dev;   // consensus loadings, 1' gamma > 0
  matrix[N, rank] V;                                 // disagreement directions, V' [1, mu] = 0, V' V = N I
  matrix[K, rank] U;                                 // disagreement loadings, 1' U = 0
  matrix[K, N] S;                                    // judge scores, eq. S-llm
  vector[N] s_H = rep_vector(0, N);                  // calibrated human score, eq. human-subspace-model
  {
    vector[N - 1] mu_dir = m_raw / sqrt(dot_self(m_raw));
    vector[N - 1] w = e_ref + mu_dir;                // Householder vector: e_ref -> -mu_dir
    matrix[N - 1, rank] Y = E_perp * Z_raw;          // orthogonal to e_ref
    matrix[N - 1, rank] Zc = Y - (2 / dot_self(w)) * w * (w' * Y);   // orthogonal to mu_dir
    matrix[K, rank] P = Q_K * orthonormal_frame(P_raw);
    matrix[N, rank] Z = Q_N * Zc;
    V = sqrt(N) * (Q_N * orthonormal_frame(Zc));
    U = P * (Z' * V) / N;
    S = gamma * mu' + P * Z';
  }
  if (calibration == 1) {
    s_H = c[1] * mu;
  } else if (calibration == 2) {
    s_H = append_col(mu, V) * c;
  }
#include covariate_tparameters.stan
