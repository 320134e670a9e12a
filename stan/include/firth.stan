/* Jeffreys-prior (Firth 1993) penalty of binomial logistic models.
 *
 * Declares: firth_penalty(X, eta, n), tie_cell_information(eta, l, ties),
 * tie_firth_penalty(X, E, eta, log_nu, n, ties), difference_design(i, j, N).
 * Included inside `functions { }` of dial.stan and judges.stan.
 *
 * The data `firth` has one meaning in every program that reads it
 * (int<lower=0, upper=2>; with ties > 0 the same GLMs of the tie family, in
 * (beta, log nu) for the groups whose tie parameter is free: tie_firth_penalty):
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
 * Fisher information of one comparison of the family `ties` in its channels
 * (eta, l = log nu): (sum_o P_o a_o^2, sum_o P_o a_o b_o, sum_o P_o b_o^2) with
 * a_o, b_o the derivatives of log P_o in eta and l, written as
 * sum_o (dP_o)(dP_o)' / P_o.  A cell at nu = 0 (l = -inf) or of the binary
 * family is binary: (p (1 - p), 0, 0).
 *
 * @param eta   linear predictor
 * @param l     log tie parameter (negative_infinity(): nu = 0)
 * @param ties  family: 0 binary, 1 Davidson-Beaver, 2 Rao-Kupper (nu = tau)
 * @return      (i_ee, i_el, i_ll)
 */
vector tie_cell_information(real eta, real l, int ties) {
  vector[3] P;
  vector[3] dpe;                                     // d P_o / d eta
  vector[3] dpl;                                     // d P_o / d l
  if (ties == 0 || is_inf(l)) {
    real p = inv_logit(eta);
    return [p * (1 - p), 0, 0]';
  }
  if (ties == 1) {
    P = softmax([0.5 * eta, -0.5 * eta, l]');
    dpe = P .* ([0.5, -0.5, 0]' - 0.5 * (P[1] - P[2]));
    dpl = P .* ([0, 0, 1]' - P[3]);
  } else {
    real tau = exp(l);
    real p_i = inv_logit(eta - tau);
    real p_j = inv_logit(-eta - tau);
    P = [p_i, p_j, 1 - p_i - p_j]';
    dpe[1] = p_i * (1 - p_i);
    dpe[2] = -p_j * (1 - p_j);
    dpe[3] = -dpe[1] - dpe[2];
    dpl[1] = -tau * dpe[1];
    dpl[2] = tau * dpe[2];
    dpl[3] = -dpl[1] - dpl[2];
  }
  return [sum(dpe .* dpe ./ P), sum(dpe .* dpl ./ P), sum(dpl .* dpl ./ P)]';
}

/**
 * Half the log determinant of the Fisher information of a paired-comparison GLM
 * of the family `ties` in (beta, l): eta = X beta and the free log tie
 * parameters l, cell t's the one row t of E selects (a zero row: nu = 0),
 * I = [X' diag(i_ee) X, X' diag(i_el) E; E' diag(i_el) X, diag(E' i_ll)]
 * with n_t times tie_cell_information (pydial.model.penalty.information_terms).
 *
 * @param X       m x p Jacobian d eta / d beta
 * @param E       m x G 0/1 selector of each cell's free tie parameter
 * @param eta     m linear predictors
 * @param log_nu  m log tie parameters (negative_infinity() where nu = 0)
 * @param n       m comparisons per cell (ties included)
 * @param ties    family (1 Davidson-Beaver, 2 Rao-Kupper)
 * @return        0.5 * log det I
 */
real tie_firth_penalty(matrix X, matrix E, vector eta, vector log_nu, array[] int n, int ties) {
  int m = rows(X);
  int p = cols(X);
  int G = cols(E);
  vector[m] i_ee;
  vector[m] i_el;
  vector[m] i_ll;
  matrix[p + G, p + G] I;
  for (t in 1:m) {
    vector[3] it = n[t] * tie_cell_information(eta[t], log_nu[t], ties);
    i_ee[t] = it[1];
    i_el[t] = it[2];
    i_ll[t] = it[3];
  }
  I[1:p, 1:p] = crossprod(diag_pre_multiply(sqrt(i_ee), X));
  if (G > 0) {
    I[1:p, (p + 1):(p + G)] = X' * diag_pre_multiply(i_el, E);
    I[(p + 1):(p + G), 1:p] = I[1:p, (p + 1):(p + G)]';
    I[(p + 1):(p + G), (p + 1):(p + G)] = diag_matrix(E' * i_ll);
  }
  return 0.5 * log_determinant(I);
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
