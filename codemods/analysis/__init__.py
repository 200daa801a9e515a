"""The model of the source: one stdlib ``ast`` parse, scopes, compile sites,
values and their variation, placement, the nn.Module model and the project
index, shared by every rule."""
