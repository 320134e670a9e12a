  // ---- dial.stan's transformed parameters (dial_tparameters.stan)
  matrix[K, N] S;                                    // judge scores S = A B'
  matrix[N, q] B;                                    // item loadings (B' 1 = 0)
  vector[N] s_H = rep_vector(0, N);                  // calibrated human score
  {
    // eq. overparam: rebuild A (A' 1 = K e_1) and B (B' 1 = 0) from the reduced rows
    vector[(K - 1) * q] Av = fix_llm ? A_fix : A_free;
    vector[(N - 1) * q] Bv = fix_llm ? B_fix : B_free;
    matrix[K, q] A;
    for (k in 1:(K - 1)) A[k] = Av[((k - 1) * q + 1):(k * q)]';
    A[K] = -(rep_row_vector(1, K - 1) * A[1:(K - 1)]);
    A[K, 1] += K;
    for (i in 1:(N - 1)) B[i] = Bv[((i - 1) * q + 1):(i * q)]';
    B[N] = -(rep_row_vector(1, N - 1) * B[1:(N - 1)]);
    S = A * B';
    // s_H = B ctilde, ctilde = (alpha, 0, ..., 0) or c
    if (calibration > 0) {
      vector[q] ctilde = rep_vector(0, q);
      ctilde[1:d] = c;
      s_H = B * ctilde;
    }
  }
#include covariate_tparameters.stan
