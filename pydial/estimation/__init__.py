"""The estimation layer: the estimators of the paper, their numpy optimizers, GACV selection and the result object.

The estimators run whichever optimizers they are given (:class:`~pydial.estimation.engines.Optimizers`);
Stan's are supplied from above (:mod:`pydial.api`), so nothing here imports :mod:`pydial.stan`.
"""
