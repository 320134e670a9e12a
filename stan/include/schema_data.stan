  // ---- the data schema of every program (schema_data.stan; pydial.stan.standata.schema_data)
  int<lower=2> N;                                    // number of items
  int<lower=0> K;                                    // number of LLM judges
  int<lower=0, upper=1> order;                       // 1 = order effects b_k (Python order=True); 0 = b = 0 (DIAL-noPos)
  int<lower=0, upper=2> ties;                        // outcome family (Python ties=): 0 binary, 1 Davidson-Beaver, 2 Rao-Kupper

  int<lower=0> C;                                    // number of LLM cells (k, i, j, a)
  array[C] int<lower=1, upper=K> cell_judge;         // judge k of the cell
  array[C] int<lower=1, upper=N> cell_i;             // canonical item i (i < j)
  array[C] int<lower=1, upper=N> cell_j;             // canonical item j
  array[C] int<lower=-1, upper=1> cell_a;            // display order: +1 if item i shown first, -1 if second
  array[C, 3] int<lower=0> cell_counts;              // (wins of item i, wins of item j, ties)
  vector<lower=0>[C] cell_w;                         // weight of the cell's log-likelihood (lambda n_H / n_LLM for lambda_=)

  int<lower=0> H;                                    // number of human cells (i, j)
  array[H] int<lower=1, upper=N> human_i;            // canonical item i (i < j)
  array[H] int<lower=1, upper=N> human_j;            // canonical item j
  array[H, 3] int<lower=0> human_counts;             // (wins of item i, wins of item j, ties)
  vector<lower=0>[H] human_w;                        // weight of the cell's log-likelihood
  int<lower=0> n_cov;                                    // number of response covariates (Python data.p; 0 = none)
  matrix[C, n_cov] cell_z;                               // covariates of each LLM cell, item i against item j (as eta)
  matrix[H, n_cov] human_z;                              // covariates of each human cell
  array[K + 1] int<lower=0> beta_row;                // row of beta of each group (judges 1..K, people K + 1); 0 = none
  int<lower=0> n_beta;                               // rows of beta (max of beta_row; 0 when n_cov = 0)
  array[n_beta, n_cov] int<lower=0, upper=1> beta_fixed;  // 1 = the entry is fixed at 0 (its covariate is 0 on the row's cells)
  array[K + 1] int<lower=0, upper=1> nu_zero;        // 1 = the group (judges 1..K, then the people) has nu = 0: binary cells
  int<lower=0, upper=1> calc_log_lik;                // 1 = write log_lik and counts_rep per cell (LLM cells, then human)
