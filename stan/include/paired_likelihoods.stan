/* Paired-comparison likelihoods shared by every pydial program.
 *
 * Declares: paired_eta(S, judge, i, j, a, b), paired_rng(counts, eta, tie_model, log_nu),
 *           paired_log_coef(counts),
 *           paired_log_lik(counts, eta, tie_model, log_nu).
 * Included inside `functions { }` by dial.stan, dial_sample.stan and
 * judges.stan: their model blocks and generated quantities call exactly these
 * three functions, so a change made here (e.g. a new tie model) reaches all of
 * them, and log_lik in generated quantities is the same number that the model
 * block adds to target.
 *
 * Cells.  A cell is one (judge k, item i, item j, display order a) with the
 * outcome counts (wins of i, wins of j, ties); a = +1 if item i was shown
 * first, -1 if second, 0 for people (no order effect).
 *
 * Tie models (tie_model, data):
 *   0  binary (no ties): wins_i ~ Binomial(wins_i + wins_j, inv_logit(eta)),
 *      eq. binomial-model-llm / binomial-model-human; ties must be 0;
 *   1  Davidson (1970) with the Davidson-Beaver (1977) order effect:
 *      P(i) : P(j) : P(tie) = e^{eta/2} : e^{-eta/2} : nu, nu = exp(log_nu);
 *      given a decisive outcome, logit P(i) = eta (the binary model);
 *   2  Rao-Kupper (1967): a logistic threshold tau = exp(log_nu) > 0,
 *      P(i) = inv_logit(eta - tau), P(j) = inv_logit(-eta - tau),
 *      P(tie) = 1 - P(i) - P(j) = (e^{2 tau} - 1) P(i) P(j).
 * Both reduce to the binary model as log_nu -> -infinity; a cell with
 * log_nu = negative_infinity() follows the binary model exactly (the nu = 0
 * boundary of a group without ties).  pydial.ties holds the same three
 * likelihoods in numpy (with derivatives).
 *
 * Constants.  Every program adds the multinomial (for binary cells the
 * binomial) coefficient of each cell, paired_log_coef, so that exp(log_lik)
 * is a probability and lp__ of the three programs is comparable.
 */

/**
 * Linear predictor of eq. binomial-model-llm for each cell:
 *   eta_t = S[judge_t, i_t] - S[judge_t, j_t] + a_t b[judge_t].
 *
 * @param S      judge scores, one row per judge (people: one row, a = 0)
 * @param judge  judge of each cell (row of S)
 * @param i, j   items of each cell
 * @param a      display order of each cell (+1, -1; 0 = no order effect)
 * @param b      order effect per judge (zeros when order effects are off)
 * @return       vector of log-odds that item i wins
 */
vector paired_eta(matrix S, array[] int judge, array[] int i, array[] int j, array[] int a, vector b) {
  int C = size(judge);
  vector[C] eta;
  for (t in 1:C) {
    eta[t] = S[judge[t], i[t]] - S[judge[t], j[t]] + a[t] * b[judge[t]];
  }
  return eta;
}

/**
 * Log multinomial coefficient of each cell's counts,
 * log (n! / (wins_i! wins_j! ties!)) with n the cell's total.
 *
 * @param counts  C x 3 counts (wins of i, wins of j, ties)
 * @return        vector of log coefficients
 */
vector paired_log_coef(array[,] int counts) {
  int C = size(counts);
  vector[C] out;
  for (t in 1:C) {
    out[t] = lgamma(counts[t, 1] + counts[t, 2] + counts[t, 3] + 1) - lgamma(counts[t, 1] + 1)
             - lgamma(counts[t, 2] + 1) - lgamma(counts[t, 3] + 1);
  }
  return out;
}

/**
 * Log-likelihood of each cell's counts without the coefficient (add
 * paired_log_coef for the log pmf).
 *
 * @param counts     C x 3 counts (wins of i, wins of j, ties)
 * @param eta        linear predictor per cell (paired_eta)
 * @param tie_model  0 binary, 1 Davidson-Beaver, 2 Rao-Kupper
 * @param log_nu     log tie parameter per cell (ignored when tie_model = 0;
 *                   negative_infinity(): the binary model, ties must be 0)
 * @return           vector of per-cell log-likelihood kernels
 */
vector paired_log_lik(array[,] int counts, vector eta, int tie_model, vector log_nu) {
  int C = size(counts);
  vector[C] out;
  for (t in 1:C) {
    real e = eta[t];
    if (tie_model == 0 || is_inf(log_nu[t])) {
      out[t] = counts[t, 1] * log_inv_logit(e) + counts[t, 2] * log1m_inv_logit(e);
    } else if (tie_model == 1) {
      vector[3] lp = log_softmax([0.5 * e, -0.5 * e, log_nu[t]]');
      out[t] = counts[t, 1] * lp[1] + counts[t, 2] * lp[2] + counts[t, 3] * lp[3];
    } else {
      real tau = exp(log_nu[t]);
      real lpi = log_inv_logit(e - tau);
      real lpj = log_inv_logit(-e - tau);
      // log(e^{2 tau} - 1) = 2 tau + log1m_exp(-2 tau)
      out[t] = counts[t, 1] * lpi + counts[t, 2] * lpj + counts[t, 3] * (2 * tau + log1m_exp(-2 * tau) + lpi + lpj);
    }
  }
  return out;
}

/**
 * Replicated counts of each cell drawn from the model (posterior predictive):
 * the cell's total is kept (for tie_model = 0 its decisive total, ties 0).
 *
 * @param counts     C x 3 observed counts (only their totals are used)
 * @param eta        linear predictor per cell (paired_eta)
 * @param tie_model  0 binary, 1 Davidson-Beaver, 2 Rao-Kupper
 * @param log_nu     log tie parameter per cell (ignored when tie_model = 0)
 * @return           C x 3 replicated counts (wins of i, wins of j, ties)
 */
array[,] int paired_rng(array[,] int counts, vector eta, int tie_model, vector log_nu) {
  int C = size(counts);
  array[C, 3] int out;
  for (t in 1:C) {
    real e = eta[t];
    if (tie_model == 0) {
      int n = counts[t, 1] + counts[t, 2];
      out[t, 1] = binomial_rng(n, inv_logit(e));
      out[t, 2] = n - out[t, 1];
      out[t, 3] = 0;
    } else {
      vector[3] p;
      if (tie_model == 1) {
        p = softmax([0.5 * e, -0.5 * e, log_nu[t]]');
      } else {
        real tau = exp(log_nu[t]);
        p[1] = inv_logit(e - tau);
        p[2] = inv_logit(-e - tau);
        p[3] = fmax(0, 1 - p[1] - p[2]);
        p /= sum(p);
      }
      out[t] = multinomial_rng(p, counts[t, 1] + counts[t, 2] + counts[t, 3]);
    }
  }
  return out;
}
