/* Linear-algebra helpers for the DIAL programs.
 *
 * Declares: centered_basis(n), centered_times(Z), orthonormal_frame(X).
 * Included inside `functions { }` of dial_sample.stan and judges.stan.
 */

/**
 * Orthonormal basis of the centered subspace {x in R^n : 1' x = 0}.
 *
 * The Helmert basis: column l (l = 1, ..., n - 1) has entries
 * 1 / sqrt(l (l + 1)) in rows 1..l, -l / sqrt(l (l + 1)) in row l + 1 and 0
 * below.  Hence Q' Q = I_{n-1} and Q' 1 = 0, and x = Q z is an isometry
 * from R^{n-1} onto the centered subspace: an exchangeable normal prior
 * z ~ normal(0, sigma) gives x ~ normal(0, sigma^2 (I - 1 1' / n)).
 *
 * @param n  dimension (n >= 1; n = 1 returns a 1 x 0 matrix)
 * @return   n x (n - 1) matrix Q
 */
matrix centered_basis(int n) {
  matrix[n, n - 1] Q = rep_matrix(0, n, n - 1);
  for (l in 1:(n - 1)) {
    real h = inv_sqrt(l * (l + 1.0));
    for (t in 1:l) {
      Q[t, l] = h;
    }
    Q[l + 1, l] = -l * h;
  }
  return Q;
}

/**
 * The product centered_basis(rows(Z) + 1) * Z in O(n) operations per column
 * (the dense product takes O(n^2)): with y_l = z_l / sqrt(l (l + 1)),
 * (Q z)_t = sum_{l >= t} y_l - (t - 1) y_{t - 1}.
 *
 * @param Z  (n - 1) x r matrix of coordinates
 * @return   n x r matrix Q Z, columns centered
 */
matrix centered_times(matrix Z) {
  int m = rows(Z);
  matrix[m + 1, cols(Z)] X;
  for (c in 1:cols(Z)) {
    vector[m] y = Z[:, c] ./ sqrt(linspaced_vector(m, 1, m) .* linspaced_vector(m, 2, m + 1));
    X[:, c] = append_row(reverse(cumulative_sum(reverse(y))), 0) - append_row(0, linspaced_vector(m, 1, m) .* y);
  }
  return X;
}

/**
 * Orthonormal frame spanning the columns of a full-column-rank matrix X:
 * the Q factor of the QR decomposition of X with positive diagonal R,
 * computed by Gram-Schmidt on the columns (equivalently F = X L^{-T} with
 * L L' = X' X).
 *
 * With X having iid standard normal entries, F is uniformly (Haar)
 * distributed on the Stiefel manifold, so a standard normal prior on X is a
 * uniform prior on the frame ("parameter expansion"; the likelihood depends
 * on X only through F).
 *
 * @param X  m x r matrix of full column rank (r may be 0)
 * @return   m x r matrix F with F' F = I_r and col(F) = col(X)
 */
matrix orthonormal_frame(matrix X) {
  int r = cols(X);
  if (r == 0) {
    return X;
  }
  matrix[rows(X), r] F = rep_matrix(0, rows(X), r);
  for (l in 1:r) {
    // classical Gram-Schmidt: remove the earlier directions, then normalize
    vector[rows(X)] v = col(X, l);
    if (l > 1) {
      v -= F[:, 1:(l - 1)] * (F[:, 1:(l - 1)]' * v);
    }
    F[:, l] = v / sqrt(dot_self(v));
  }
  return F;
}
