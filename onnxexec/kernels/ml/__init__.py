"""Classic ML (ai.onnx.ml): tree ensembles, linear models, SVMs.

Entry points: `trees.Forest` / `predict_forest` (and its aggregate codes),
`tree_scores.predict_classes` / `predict_targets`, `ml_scores.linear_classify` /
`normalize` / `scale_rows` / `transform_rows`, `ml_svm.svc_scores` / `svr_scores` /
`kernel_values`.

No numba import here: the modules use kernels.objload.
"""
