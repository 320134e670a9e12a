/* Paired-comparison likelihoods shared by every pydial program (functions only).
 *
 * Declares
 *   cell indexing:    tie_index(n_nu, H, nu_zero), free_positions(fixed, n_cov),
 *                     cell_beta_rows(beta_row, group, n_cov), check_tie_counts(counts, group, ties, nu_zero)
 *   cell inputs:      paired_design(R, N, judge, i, j, a, n_b) (the design X of eta, sparse),
 *                     paired_eta(S, b, X), paired_log_nu(log_nu, nu_index, judge),
 *                     beta_rows(beta_free, pos, n_cov), paired_offset(z, beta, row) (the covariate term z' beta)
 *   cell likelihood:  paired_kernel(counts, eta, ties, log_nu) (counts times log probabilities),
 *                     paired_log_lik(counts, log_coef, eta, ties, log_nu),
 *                     paired_target(w_counts, w_log_coef, eta, ties, log_nu) (its weighted sum)
 *   outcome model:    paired_prob(eta, ties, log_nu), paired_rng(counts, eta, ties, log_nu),
 *                     paired_win_prob(s, ties, log_nu), paired_log_coef(counts)
 * The model block of a program adds target += paired_target(w_counts, ...),
 * the weighted sum of paired_log_lik; its generated quantities write log_lik =
 * paired_log_lik(...) and counts_rep = paired_rng(...) from the same inputs,
 * so log_lik is the per-cell number the model block weights and adds.
 *
 * Cells.  A cell is one (judge k, item i, item j, display order a) with the
 * outcome counts (wins of i, wins of j, ties); a = +1 if item i was shown
 * first, -1 if second, 0 for people (no order effect).  The programs list
 * every cell once, LLM cells then human cells (their all_* arrays), and
 * score the people as one more judge (group K + 1): row K + 1 of the score
 * matrix.
 *
 * Outcome families (data `ties`, as the Python argument ties=):
 *   0  binary (no ties): wins_i ~ Binomial(wins_i + wins_j, inv_logit(eta)),
 *      eq. binomial-model-llm / binomial-model-human; ties must be 0;
 *   1  Davidson (1970) with the Davidson-Beaver (1977) order effect:
 *      P(i) : P(j) : P(tie) = e^{eta/2} : e^{-eta/2} : nu, nu = exp(log_nu);
 *      given a decisive outcome, logit P(i) = eta (the binary model);
 *   2  Rao-Kupper (1967): a logistic threshold tau = exp(log_nu) > 0,
 *      P(i) = inv_logit(eta - tau), P(j) = inv_logit(-eta - tau),
 *      P(tie) = 1 - P(i) - P(j) = (e^{2 tau} - 1) P(i) P(j).
 * Both reduce to the binary model as log_nu -> -infinity; a cell with
 * log_nu = negative_infinity() follows the binary model exactly (a group
 * without a tie parameter, or with nu = 0).  pydial.model.families holds the
 * same three likelihoods in numpy (with derivatives), and its
 * tie_probabilities the same probabilities as paired_prob.
 *
 * Constants.  paired_log_lik includes the multinomial (for binary cells the
 * binomial) coefficient of each cell, so that exp(log_lik) is a probability
 * and lp__ of the programs is comparable.
 *
 * Extending.  A program changes the inputs of a cell, not these functions:
 * it adds an offset to the linear predictor (eta += x * beta) or to the log
 * tie parameter (log_nu_cell -= kappa[all_judge] .* square(eta)) where it
 * computes them, in the model block and the generated quantities alike, as
 * the example program tie_gap.stan (pydial.stan.program_code("tie_gap"))
 * does.  A new outcome family is one more `ties` code in paired_log_lik and
 * paired_prob (and in pydial.model.families).
 */

/**
 * Reject the cells with ties where the model has none: every cell when
 * ties = 0, the cells of a group with nu_zero = 1 otherwise.
 *
 * @param counts   counts (wins of i, wins of j, ties) per cell
 * @param group    group of each cell (LLM judge 1..K, people K + 1)
 * @param ties     outcome family: 0 binary, 1 Davidson-Beaver, 2 Rao-Kupper
 * @param nu_zero  1 = the group has nu = 0 (binary cells), per group
 */
void check_tie_counts(array[,] int counts, array[] int group, int ties, array[] int nu_zero) {
  for (t in 1:size(counts)) {
    if (counts[t, 3] > 0 && ties == 0) reject("cell ", t, " (group ", group[t], ") has ties but ties = 0 (binary)");
    if (counts[t, 3] > 0 && nu_zero[group[t]]) reject("cell ", t, " (group ", group[t], ") has ties but nu_zero");
  }
}

/**
 * Entry of log_nu of each group: LLM judge k has entry k (when the judges
 * have tie parameters), the people (group K + 1, when there are human cells)
 * the last entry; 0 = none (nu = 0, binary cells: no tie model, or nu_zero).
 *
 * @param n_nu     size of log_nu: 0 (binary), K + (H > 0), or H > 0 alone
 *                 (the judges' tie parameters held as data)
 * @param H        number of human cells
 * @param nu_zero  1 = the group has nu = 0, per group (judges 1..K, people)
 * @return         entry of log_nu per group, 0 = none
 */
array[] int tie_index(int n_nu, int H, array[] int nu_zero) {
  int K = size(nu_zero) - 1;
  array[K + 1] int index = rep_array(0, K + 1);
  if (n_nu > (H > 0)) {
    for (k in 1:K) index[k] = nu_zero[k] ? 0 : k;
  }
  if (n_nu > 0 && H > 0 && !nu_zero[K + 1]) index[K + 1] = n_nu;
  return index;
}

/**
 * Position of each free entry of beta in beta_free, row-major; 0 where the
 * entry is fixed at 0.
 *
 * @param fixed  1 = the entry is fixed at 0 (rows of beta x n_cov)
 * @param n_cov  number of covariates
 * @return       positions, shaped as fixed
 */
array[,] int free_positions(array[,] int fixed, int n_cov) {
  array[size(fixed), n_cov] int pos;
  int n = 0;
  for (g in 1:size(fixed)) {
    for (u in 1:n_cov) {
      n += 1 - fixed[g, u];
      pos[g, u] = fixed[g, u] ? 0 : n;
    }
  }
  return pos;
}

/**
 * Row of beta of each cell: its group's beta_row (0 when n_cov = 0).
 * Rejects a cell with covariates whose group has no row.
 *
 * @param beta_row  row of beta per group (judges 1..K, people K + 1), 0 = none
 * @param group     group of each cell
 * @param n_cov     number of covariates
 * @return          row of beta per cell
 */
array[] int cell_beta_rows(array[] int beta_row, array[] int group, int n_cov) {
  array[size(group)] int row = rep_array(0, size(group));
  if (n_cov > 0) {
    for (t in 1:size(group)) {
      row[t] = beta_row[group[t]];
      if (row[t] == 0) reject("cell ", t, " has covariates but its group ", group[t], " has beta_row = 0");
    }
  }
  return row;
}

/**
 * The covariate effects as rows: beta[g, u] = beta_free[pos[g, u]], 0 where
 * the entry is fixed (pos = 0).
 *
 * @param beta_free  the free entries of beta, row-major
 * @param pos        free_positions(beta_fixed, n_cov)
 * @param n_cov      number of covariates
 * @return           one vector of n_cov effects per row of beta
 */
array[] vector beta_rows(vector beta_free, array[,] int pos, int n_cov) {
  array[size(pos)] vector[n_cov] beta;
  for (g in 1:size(pos)) {
    for (u in 1:n_cov) beta[g, u] = pos[g, u] > 0 ? beta_free[pos[g, u]] : 0.0;
  }
  return beta;
}

/**
 * The design of the cells' linear predictor, eq. binomial-model-llm:
 *   eta_t = S[judge_t, i_t] - S[judge_t, j_t] + a_t b[judge_t] = X[t] theta,
 *   theta = (to_vector(S), b)   (S column-major: S[k, i] is entry k + R (i - 1)),
 * as a sparse matrix X in compressed row storage (Stan's csr_* functions):
 * values, column indices and row starts.  Every row has three entries, +1 and
 * -1 for the two scores and a_t for the order effect (a structural 0 in
 * column 1 when the cell has a = 0 or there are no order effects), so the
 * sizes are known: (3 n, 3 n, n + 1) for n cells.  Built once in transformed
 * data; paired_eta multiplies it by theta in one autodiff node.
 *
 * @param R      rows of S (LLM judges, then the people as row K + 1)
 * @param N      items (columns of S)
 * @param judge  row of S of each cell
 * @param i, j   items of each cell
 * @param a      display order of each cell (+1, -1; 0 = no order effect)
 * @param n_b    size of b: rows of S with an order effect (0 = none)
 * @return       (values, column indices, row starts) of X
 */
tuple(vector, array[] int, array[] int) paired_design(int R, int N, array[] int judge, array[] int i, array[] int j,
                                                      array[] int a, int n_b) {
  int n = size(judge);
  vector[3 * n] w;
  array[3 * n] int v;
  array[n + 1] int u;
  for (t in 1:n) {
    int z = 3 * (t - 1);
    u[t] = z + 1;
    w[z + 1] = 1;
    v[z + 1] = judge[t] + R * (i[t] - 1);
    w[z + 2] = -1;
    v[z + 2] = judge[t] + R * (j[t] - 1);
    if (a[t] != 0 && n_b > 0) {
      if (judge[t] > n_b) reject("cell ", t, " has display order ", a[t], " but its judge ", judge[t], " has no order effect");
      w[z + 3] = a[t];
      v[z + 3] = R * N + judge[t];
    } else {
      w[z + 3] = 0;
      v[z + 3] = 1;
    }
  }
  u[n + 1] = 3 * n + 1;
  return (w, v, u);
}

/**
 * Linear predictor of each cell, eq. binomial-model-llm:
 *   eta_t = S[judge_t, i_t] - S[judge_t, j_t] + a_t b[judge_t],
 * the product of the design X (paired_design) and theta = (to_vector(S), b).
 *
 * @param S  scores, one row per judge (the people: their own row, a = 0)
 * @param b  order effects (the n_b of the design; empty = none)
 * @param X  paired_design(rows(S), cols(S), judge, i, j, a, size(b))
 * @return   log-odds that item i wins, per cell
 */
vector paired_eta(matrix S, vector b, tuple(vector, array[] int, array[] int) X) {
  if (size(X.3) == 1) return rep_vector(0, 0);   // no cells
  return csr_matrix_times_vector(size(X.3) - 1, rows(S) * cols(S) + rows(b), X.1, X.2, X.3, append_row(to_vector(S), b));
}

/**
 * Covariate term of each cell: z_t' beta[row[t]], the style term added to eta
 * (logit p = S_ki - S_kj + a b_k + z' beta_k for LLM judge k, s_Hi - s_Hj +
 * z' beta_H for people; pydial.model.likelihood.Objective with covariates).
 *
 * @param z     covariates of each cell (cells x n_cov), oriented as eta: the
 *              comparison covariate of item i against item j
 * @param beta  covariate effects, one vector of length n_cov per row
 * @param row   row of beta of each cell; 0 = no covariate term
 * @return      z' beta per cell (zeros when n_cov = 0)
 */
vector paired_offset(matrix z, array[] vector beta, array[] int row) {
  int n = rows(z);
  vector[n] out = rep_vector(0, n);
  if (cols(z) == 0) return out;
  for (t in 1:n) {
    if (row[t] > 0) out[t] = z[t] * beta[row[t]];
  }
  return out;
}

/**
 * Log tie parameter of each cell: its judge's entry of log_nu.
 *
 * @param log_nu    log tie parameters
 * @param nu_index  entry of log_nu of each judge (group); 0 = the group has
 *                  none, its cells are binary (negative_infinity())
 * @param judge     judge (group) of each cell
 * @return          log nu per cell
 */
vector paired_log_nu(vector log_nu, array[] int nu_index, array[] int judge) {
  int n = size(judge);
  array[n] int entry;                                // entry of (negative_infinity(), log_nu) of each cell
  for (t in 1:n) entry[t] = nu_index[judge[t]] + 1;
  return append_row(rep_vector(negative_infinity(), 1), log_nu)[entry];
}

/**
 * Log multinomial coefficient of each cell's counts,
 * log (n! / (wins_i! wins_j! ties!)) with n the cell's total.
 *
 * @param counts  counts (wins of i, wins of j, ties) per cell
 * @return        log coefficient per cell
 */
vector paired_log_coef(array[,] int counts) {
  int n = size(counts);
  vector[n] out;
  for (t in 1:n) {
    out[t] = lgamma(counts[t, 1] + counts[t, 2] + counts[t, 3] + 1) - lgamma(counts[t, 1] + 1)
             - lgamma(counts[t, 2] + 1) - lgamma(counts[t, 3] + 1);
  }
  return out;
}

/**
 * Counts times log probabilities of each cell under the outcome family,
 * wins_i log P(i) + wins_j log P(j) + ties log P(tie): the one cell kernel of
 * paired_log_lik (integer counts) and paired_target (weighted counts).
 *
 * @param counts  (wins of i, wins of j, ties) per cell, as reals (possibly weighted)
 * @param eta     linear predictor per cell (paired_eta, plus any offset)
 * @param ties    outcome family: 0 binary, 1 Davidson-Beaver, 2 Rao-Kupper
 * @param log_nu  log tie parameter per cell (paired_log_nu, plus any
 *                offset); ignored when ties = 0; negative_infinity(): the
 *                binary model (the cell then has no ties)
 * @return        the kernel per cell
 */
vector paired_kernel(matrix counts, vector eta, int ties, vector log_nu) {
  int n = rows(counts);
  if (ties == 0) {
    // wins_i log inv_logit(eta) + wins_j log1m_inv_logit(eta), one transcendental function per cell
    return counts[:, 1] .* eta - (counts[:, 1] + counts[:, 2]) .* log1p_exp(eta);
  }
  vector[n] out;
  for (t in 1:n) {
    real e = eta[t];
    if (is_inf(log_nu[t])) {
      out[t] = counts[t, 1] * log_inv_logit(e) + counts[t, 2] * log1m_inv_logit(e);
    } else if (ties == 1) {
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
 * Log probability of each cell's counts under the outcome family: the
 * per-cell log-likelihood of every program's generated quantities.
 *
 * @param counts    counts (wins of i, wins of j, ties) per cell
 * @param log_coef  paired_log_coef(counts), computed once in transformed data
 * @param eta, ties, log_nu  as in paired_kernel
 * @return          log p(counts) per cell
 */
vector paired_log_lik(array[,] int counts, vector log_coef, vector eta, int ties, vector log_nu) {
  return log_coef + paired_kernel(to_matrix(counts), eta, ties, log_nu);
}

/**
 * Weighted sum of the cells' log probabilities, the likelihood term of the
 * model block: sum_t w_t log p(counts_t) = dot_product(w, paired_log_lik(...)),
 * from the weighted counts w_counts = diag_pre_multiply(w, to_matrix(counts))
 * and w_log_coef = dot_product(w, log_coef), both data computed once in
 * transformed data.  Binary cells are summed in two dot products:
 * w_log_coef + w wins_i' eta - w n' log1p_exp(eta), n = wins_i + wins_j.
 *
 * @param w_counts    weighted counts (wins of i, wins of j, ties) per cell
 * @param w_log_coef  weighted sum of the cells' log coefficients
 * @param eta, ties, log_nu  as in paired_kernel
 * @return            sum over cells of w times log p(counts)
 */
real paired_target(matrix w_counts, real w_log_coef, vector eta, int ties, vector log_nu) {
  if (ties == 0) {
    return w_log_coef + dot_product(w_counts[:, 1], eta) - dot_product(w_counts[:, 1] + w_counts[:, 2], log1p_exp(eta));
  }
  return w_log_coef + sum(paired_kernel(w_counts, eta, ties, log_nu));
}

/**
 * Outcome probabilities of one comparison under the family (as
 * pydial.ties.tie_probabilities).
 *
 * @param eta     linear predictor
 * @param ties    outcome family: 0 binary, 1 Davidson-Beaver, 2 Rao-Kupper
 * @param log_nu  log tie parameter (negative_infinity(): binary)
 * @return        (P(i wins), P(j wins), P(tie))
 */
vector paired_prob(real eta, int ties, real log_nu) {
  if (ties == 0 || is_inf(log_nu)) {
    return [inv_logit(eta), inv_logit(-eta), 0]';
  }
  if (ties == 1) {
    return softmax([0.5 * eta, -0.5 * eta, log_nu]');
  }
  real tau = exp(log_nu);
  real p_i = inv_logit(eta - tau);
  real p_j = inv_logit(-eta - tau);
  return [p_i, p_j, fmax(0, 1 - p_i - p_j)]';
}

/**
 * Replicated counts of each cell drawn from the model (posterior
 * predictive): the cell's total is kept; a binary cell (ties = 0, or log nu
 * = negative_infinity()) keeps its decisive total and gets no ties.
 *
 * @param counts  observed counts per cell (only their totals are used)
 * @param eta     linear predictor per cell
 * @param ties    outcome family: 0 binary, 1 Davidson-Beaver, 2 Rao-Kupper
 * @param log_nu  log tie parameter per cell (ignored when ties = 0)
 * @return        replicated counts (wins of i, wins of j, ties) per cell
 */
array[,] int paired_rng(array[,] int counts, vector eta, int ties, vector log_nu) {
  int n = size(counts);
  array[n, 3] int out;
  for (t in 1:n) {
    if (ties == 0 || is_inf(log_nu[t])) {
      int m = counts[t, 1] + counts[t, 2];
      out[t, 1] = binomial_rng(m, inv_logit(eta[t]));
      out[t, 2] = m - out[t, 1];
      out[t, 3] = 0;
    } else {
      vector[3] p = paired_prob(eta[t], ties, log_nu[t]);
      out[t] = multinomial_rng(p / sum(p), counts[t, 1] + counts[t, 2] + counts[t, 3]);
    }
  }
  return out;
}

/**
 * Win probabilities of one judge (e.g. the people) with scores s and no
 * order effect: P[i, j] = P(i wins against j) under the family, the first
 * entry of paired_prob(s[i] - s[j], ties, log_nu).  A tie is not a win:
 * P[i, j] + P[j, i] + P(tie) = 1, with P(tie) = 0 in the binary model
 * (P[i, j] = inv_logit(s[i] - s[j])).
 *
 * @param s       scores of the N items
 * @param ties    outcome family: 0 binary, 1 Davidson-Beaver, 2 Rao-Kupper
 * @param log_nu  the judge's log tie parameter (negative_infinity(): binary)
 * @return        N x N matrix of win probabilities
 */
matrix paired_win_prob(vector s, int ties, real log_nu) {
  int N = rows(s);
  matrix[N, N] P;
  for (i in 1:N) {
    for (j in 1:N) {
      P[i, j] = paired_prob(s[i] - s[j], ties, log_nu)[1];
    }
  }
  return P;
}
