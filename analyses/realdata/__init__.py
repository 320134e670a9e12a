"""Real-data protocol of the DIAL paper (App. "Real Data") on the bundled Chatbot Arena data.

Run ``python -m analyses.realdata --help`` from the repository root.
"""
