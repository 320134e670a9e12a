/* Paired-comparison likelihoods for the DIAL programs.
 *
 * Declares: binomial_nll(eta, n, y), davidson_beaver_log_probs(x, log_nu),
 *           paired_cell_lpmf(counts | x, has_tie, log_nu).
 * Included inside `functions { }`.  Everything is on the log scale.
 */

/**
 * Per-cell binomial negative log-likelihood without the binomial
 * coefficient, n log(1 + e^eta) - y eta: the summands of eq. human-full-loss
 * and eq. llm-negloglik (the convention of pydial.likelihood.binomial_nll).
 *
 * @param eta  log-odds that item i wins, one per cell
 * @param n    comparisons per cell
 * @param y    wins of item i per cell
 * @return     vector of per-cell negative log-likelihoods
 */
vector binomial_nll(vector eta, array[] int n, array[] int y) {
  return to_vector(n) .* log1p_exp(eta) - to_vector(y) .* eta;
}

/**
 * Log-probabilities of (item i wins, item j wins, tie) for one comparison
 * under the Davidson (1970) tie model with the Davidson-Beaver (1977) order
 * effect.
 *
 * With theta_i = exp(s_i) and delta = exp(a b) the order factor of the
 * first-shown item, Davidson-Beaver give probabilities proportional to
 *   (i wins, j wins, tie) ~ (theta_i delta^{a/2}, theta_j delta^{-a/2},
 *                            nu sqrt(theta_i theta_j)),
 * i.e. log-odds (s_i + a b / 2, s_j - a b / 2, log nu + (s_i + s_j) / 2).
 * Subtracting (s_i + s_j) / 2 from all three (softmax is shift invariant)
 * leaves (x, -x, log nu) with x = (s_i - s_j + a b) / 2.  Given a decisive
 * outcome, P(i wins) = inv_logit(2 x) = inv_logit(s_i - s_j + a b), which
 * is eq. binomial-model-llm; as nu -> 0 the tie probability vanishes.
 * log_softmax makes the three probabilities sum to one.
 *
 * @param x       half the order-adjusted score difference (s_i - s_j + a b) / 2
 * @param log_nu  log tie parameter
 * @return        3-vector of log-probabilities (i wins, j wins, tie)
 */
vector davidson_beaver_log_probs(real x, real log_nu) {
  return log_softmax([x, -x, log_nu]');
}

/**
 * Log-likelihood of one cell's outcome counts, including the multinomial
 * (binomial) coefficient, so that exp() of it is a probability mass.
 *
 * has_tie = 1: counts ~ multinomial(softmax(x, -x, log_nu)), Davidson-Beaver.
 * has_tie = 0: counts[1] ~ binomial(counts[1] + counts[2], inv_logit(2 x)),
 *              the order-effect Bradley-Terry model; counts[3] must be 0.
 *
 * @param counts   {wins of item i, wins of item j, ties}
 * @param x        (s_i - s_j + a b) / 2
 * @param has_tie  1 if the cell's judge has a tie parameter, else 0
 * @param log_nu   log tie parameter (ignored when has_tie = 0)
 * @return         log probability of the counts
 */
real paired_cell_lpmf(array[] int counts, real x, int has_tie, real log_nu) {
  if (has_tie) {
    // log multinomial coefficient + sum_o counts[o] log P(o)
    return lgamma(sum(counts) + 1) - lgamma(counts[1] + 1) - lgamma(counts[2] + 1)
           - lgamma(counts[3] + 1)
           + dot_product(to_vector(counts), davidson_beaver_log_probs(x, log_nu));
  }
  if (counts[3] != 0) {
    reject("paired_cell_lpmf: ", counts[3], " ties in a cell whose judge has no tie parameter");
  }
  return binomial_logit_lpmf(counts[1] | counts[1] + counts[2], 2 * x);
}
