  // ---- dial_sample.stan's constants and checks (dial_sample_tdata.stan, after schema_tdata.stan)
  int q = rank + 1;                                  // rank of S
  if (N < 3 || K < 1) reject("dial_sample.stan needs N >= 3 items and K >= 1 judges");
  int d = calibration == 0 ? 0 : (calibration == 1 ? 1 : q);   // calibration dimension
  matrix[N, N - 1] Q_N = centered_basis(N);          // orthonormal basis of {x : 1' x = 0} in R^N
  matrix[K, K - 1] Q_K = centered_basis(K);          // same in R^K
  if (rank > K - 1 || q > N - 1) {
    reject("rank r = ", rank, " needs r <= K - 1 = ", K - 1, " and r + 1 <= N - 1 = ", N - 1,
           " (r is the disagreement rank of the structured LLM model)");
  }
  if (calibration == 0 && H > 0) {
    reject("human cells need a calibration basis (calibration = 1 or 2)");
  }
  // orthonormal basis of e^perp in R^{N-1}, e = mu_ref / ||mu_ref||: columns 2.. of the
  // Householder reflection taking the first unit vector to e
  real frame_sd = 0.2;                               // scale of the parameter expansion of P
  vector[N - 1] e_ref = mu_ref / sqrt(dot_self(mu_ref));
  matrix[N - 1, N - 2] E_perp;
  {
    vector[N - 1] w0 = -e_ref;
    w0[1] += 1;
    matrix[N - 1, N - 1] H0 = identity_matrix(N - 1);
    if (dot_self(w0) > 1e-24) {
      H0 -= (2 / dot_self(w0)) * (w0 * w0');
    }
    E_perp = H0[:, 2:(N - 1)];
  }
