

def test_compile_given_a_module_says_how_to_get_a_graph():
    import torch

    import hoid

    with pytest.raises(hoid.NotAGraphError, match="from_torch"):
        hoid.compile(torch.nn.Linear(2, 2))
