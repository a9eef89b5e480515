"""The agent: the optimization loop (`optimize`), its `Budget`, the proposer protocol and the library proposer,
the LLM proposers (`openai:<model>`, `openai-advisor:<model>`), the journal, the executors (in-process,
`WorkerPool`: a worker per local GPU, `RayPool`: a Ray cluster) and the report.
Nothing here imports egglog until a run starts.

    opt = hoid.optimize(graph, agent="library", budget=hoid.Budget(minutes=10), device="h200")
    print(opt.report); opt.graph; opt.speedup   # None for a modelled plan: see opt.report
"""

from .advisory import AdvisoryProposer
from .agents import proposer_names, register_proposer
from .budget import Budget, Spend
from .codegen_proposer import CodegenProposer
from .dir_proposer import DirectoryProposer
from .executor import Evidence, Executor, LocalExecutor
from .journal import Journal
from .library_proposer import LibraryProposer
from .loop import Optimized, optimize
from .openai_proposer import OpenAIProposer
from .pool import WorkerPool
from .proposer import Context, Outcome, Proposal, Proposer, RegionInfo
from .ray_executor import RayPool  # imports Ray only when a RayPool is made
from .report import Report

__all__ = ["AdvisoryProposer", "Budget", "CodegenProposer", "Context", "DirectoryProposer", "Evidence", "Executor",
           "Journal", "LibraryProposer", "LocalExecutor", "OpenAIProposer", "Optimized", "Outcome", "Proposal",
           "Proposer", "RayPool", "RegionInfo", "Report", "Spend", "WorkerPool", "optimize", "proposer_names",
           "register_proposer"]
