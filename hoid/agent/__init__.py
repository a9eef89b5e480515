"""The optimization loop, proposers (library, directory, codegen, LLM), the journal and reports.

Arrives with the optimization-loop and LLM-agent issues.
"""
