/* Jeffreys-prior (Firth 1993) penalty of binomial logistic models.
 *
 * Declares: firth_penalty(X, eta, n), difference_design(i, j, N).
 * Included inside `functions { }` of dial.stan and judges.stan.
 *
 * The data `firth` has one meaning in every program that reads it
 * (int<lower=0, upper=2>; binary cells only, ties = 0):
 *   0  no Jeffreys prior;
 *   1  the Jeffreys prior of each judge's own BTL: the binomial GLM of a
 *      judge's cells in its centered scores and order effect.  judges.stan:
 *      every LLM judge and the people (one more judge); dial.stan: only where
 *      its LLM cells are one such GLM (K = 1, rank 0, not fix_llm: the pooled
 *      BTL), otherwise rejected;
 *   2  the Jeffreys prior of the human calibration GLM (design D_H M, basis
 *      normalized, pydial.model.penalty.CalibrationFirthPenalty): dial.stan
 *      only (judges.stan has no calibration and rejects it).
 *
 * Adding firth_penalty to the target turns the log-likelihood l(theta) into
 * l(theta) + 1/2 log det I(theta), the log posterior under the Jeffreys prior,
 * whose mode is Firth's bias-reduced estimate (finite under separation when X
 * has full column rank; Kosmidis & Firth 2021).  Same term as
 * pydial.penalty.FirthPenalty (up to the loss normalization).
 */

/**
 * Half the log determinant of the binomial logistic Fisher information
 * X' diag(n p (1 - p)) X at p = inv_logit(eta).
 *
 * @param X    m x q Jacobian d eta / d beta of the penalized parameters (full column rank)
 * @param eta  m linear predictors
 * @param n    m binomial counts
 * @return     0.5 * log det(X' diag(n p (1 - p)) X)
 */
real firth_penalty(matrix X, vector eta, array[] int n) {
  vector[rows(X)] w = to_vector(n) .* inv_logit(eta) .* inv_logit(-eta);
  return 0.5 * log_determinant(crossprod(diag_pre_multiply(sqrt(w), X)));
}

/**
 * Item-difference design: row t is (e_{i[t]} - e_{j[t]})'.
 *
 * @param i  first items (1-based)
 * @param j  second items (1-based)
 * @param N  number of items
 * @return   size(i) x N matrix
 */
matrix difference_design(array[] int i, array[] int j, int N) {
  matrix[size(i), N] D = rep_matrix(0, size(i), N);
  for (t in 1:size(i)) {
    D[t, i[t]] = 1;
    D[t, j[t]] = -1;
  }
  return D;
}
