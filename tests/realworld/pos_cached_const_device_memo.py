# realworld: positive fix=safe graphs=2
# Pattern: vmoens/mujoco-torch before f234fb3 ("[BugFix] Warm _CachedConst
# caches before first compile trace", PR #68): math._CachedConst, a plain
# object, memoises a constant per (dtype, device) in a dict filled lazily by
# `get()`, called from helpers of `step`, run as
# torch.compile(torch.vmap(step, in_dims=(None, 0)), fullgraph=True). The
# first trace sees the key absent and fills the dict; the second call fails
# `not ___dict_contains((torch.int64, 'cpu'), ..._TRI_ID._cache)` and
# recompiles (`warm_all` existed, never called). Trimmed to a hinge chain.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 3 calls; FR014's fix (safe: the value is a pure function of the key) (a local dict, fresh while
# compiling): 1, the same output.
import dataclasses
from typing import Sequence

import torch
import torch.utils._pytree as pytree

mjMINVAL = 1e-15


# ---- mujoco_torch/_src/math.py ----------------------------------------------------------------
class _CachedConst:
    """A constant tensor created from a Python literal, with per-(dtype,device) caching.

    Avoids CPU→CUDA copies during CUDA graph capture by caching the
    device copy from warmup runs.  Call ``warm_all`` after ``device_put``
    to pre-populate every instance for the target device so that the first
    ``torch.compile`` trace never records a DeviceCopy.
    """

    _instances: list["_CachedConst"] = []

    __slots__ = ("_values", "_cache")

    def __init__(self, values, dtype=None):
        self._values = torch.tensor(values, dtype=dtype)
        self._cache: dict[tuple, torch.Tensor] = {}
        _CachedConst._instances.append(self)

    def get(self, dtype, device) -> torch.Tensor:
        key = (dtype, str(device))
        t = self._cache.get(key)
        if t is None:
            t = self._values.to(dtype=dtype, device=device)
            self._cache[key] = t  # expect: FR014
        return t

    @classmethod
    def warm_all(cls, device, dtypes=(torch.float64, torch.float32, torch.long, torch.int32, torch.bool)):
        """Pre-populate the cache of every ``_CachedConst`` instance."""
        for inst in cls._instances:
            for dtype in dtypes:
                try:
                    inst.get(dtype, device)
                except Exception:
                    pass


_QUAT_INV_SIGNS = _CachedConst([1, -1, -1, -1])
_TRI_ID = _CachedConst([[0, 3, 4], [3, 1, 5], [4, 5, 2]], dtype=torch.long)
_INF_RANGE = _CachedConst([-torch.inf, torch.inf])


def cross(a, b):
    return torch.stack(
        [
            a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
            a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
            a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0],
        ],
        dim=-1,
    )


def inert_mul(i, v):
    """Multiply inertia by motion, producing force."""
    tri_id = _TRI_ID.get(torch.long, i.device)
    inr, pos, mass = i[tri_id], i[6:9], i[9]
    ang = (inr * v[:3]).sum(-1) + cross(pos, v[3:])
    vel = mass * v[3:] - cross(pos, v[:3])
    return torch.cat((ang, vel))


# ---- types (stand-ins for the MjTensorClass Model / Data) -------------------------------------
class JointType:
    HINGE = 3


class IntegratorType:
    EULER = 0


@dataclasses.dataclass
class Option:
    timestep: float = 0.01
    disableflags: int = 0
    integrator: int = IntegratorType.EULER


@dataclasses.dataclass
class Model:
    nu: int
    na: int
    nv: int
    opt: Option
    jnt_type: tuple
    qpos0: torch.Tensor
    dof_damping: torch.Tensor
    dof_armature: torch.Tensor
    body_cinert: torch.Tensor  # (nbody, 10)
    body_cdof: torch.Tensor  # (nv, 6) motion subspace of each dof
    actuator_ctrllimited_bool: torch.Tensor
    actuator_ctrlrange: torch.Tensor
    actuator_gear: torch.Tensor


@dataclasses.dataclass
class Data:
    time: torch.Tensor
    qpos: torch.Tensor
    qvel: torch.Tensor
    act: torch.Tensor
    ctrl: torch.Tensor
    qfrc_bias: torch.Tensor
    qfrc_actuator: torch.Tensor
    qfrc_smooth: torch.Tensor
    qacc: torch.Tensor

    def clone(self, recurse=True):
        return dataclasses.replace(self)

    def update_(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)
        return self


pytree.register_dataclass(Data)  # Data is vmapped (in_dims=0); Model is passed unbatched (in_dims=None)


# ---- mujoco_torch/_src/forward.py ---------------------------------------------------------------
def _velocity(m: Model, d: Data) -> Data:
    """Velocity-dependent computations (bias force via inertia * motion, as in smooth.rne)."""
    cvel = d.qvel[:, None] * m.body_cdof  # (nv, 6)
    frc = torch.vmap(inert_mul)(m.body_cinert, cvel)
    qfrc_bias = (frc * m.body_cdof).sum(-1)
    d.update_(qfrc_bias=qfrc_bias)
    return d


def _actuation(m: Model, d: Data) -> Data:
    """Actuation-dependent computations."""
    if not m.nu:
        d.update_(qfrc_actuator=torch.zeros((m.nv,)))
        return d

    ctrl = d.ctrl
    ctrlrange = torch.where(
        m.actuator_ctrllimited_bool,
        m.actuator_ctrlrange,
        _INF_RANGE.get(ctrl.dtype, ctrl.device),
    )
    ctrl = torch.minimum(torch.maximum(ctrl, ctrlrange[:, 0]), ctrlrange[:, 1])
    qfrc_actuator = m.actuator_gear * ctrl
    d.update_(qfrc_actuator=qfrc_actuator)
    return d


def _acceleration(m: Model, d: Data) -> Data:
    """Add up all non-constraint forces, compute qacc_smooth."""
    qfrc_smooth = -d.qfrc_bias + d.qfrc_actuator
    qacc = qfrc_smooth / (m.body_cinert[:, 9] + m.dof_armature)
    d.update_(qfrc_smooth=qfrc_smooth, qacc=qacc)
    return d


def forward(m: Model, d: Data) -> Data:
    d = _velocity(m, d)
    d = _actuation(m, d)
    d = _acceleration(m, d)
    return d


def _integrate_pos(jnt_typs: Sequence[int], qpos, qvel, dt):
    qs, qi, vi = [], 0, 0
    for jnt_typ in jnt_typs:
        if jnt_typ == JointType.HINGE:
            pos = qpos[qi] + dt * qvel[vi]
            qs.append(pos[None])
            qi, vi = qi + 1, vi + 1
        else:
            raise RuntimeError(f"unrecognized joint type: {jnt_typ}")
    return torch.cat(qs) if qs else torch.empty((0,))


def _advance(m: Model, d: Data, act_dot, qacc, qvel=None, dt=None) -> Data:
    if dt is None:
        dt = m.opt.timestep
    act = d.act
    new_qvel = d.qvel + qacc * dt
    qvel_for_pos = new_qvel if qvel is None else qvel
    qpos = _integrate_pos(m.jnt_type, d.qpos, qvel_for_pos, dt=dt)
    time = d.time + dt
    d.update_(qvel=new_qvel, act=act, qpos=qpos, time=time)
    return d


def _euler(m: Model, d: Data) -> Data:
    """Euler integrator, semi-implicit in velocity (damping integrated implicitly)."""
    qacc = (d.qfrc_smooth - m.dof_damping * d.qvel) / (
        m.body_cinert[:, 9] + m.dof_armature + m.opt.timestep * m.dof_damping
    )
    return _advance(m, d, torch.zeros_like(d.act), qacc)


def step(m: Model, d: Data) -> Data:
    """Advance simulation."""
    d = d.clone(recurse=False)
    d = forward(m, d)
    if m.opt.integrator == IntegratorType.EULER:
        d = _euler(m, d)
    else:
        raise NotImplementedError(f"integrator {m.opt.integrator} not implemented.")
    return d


# ---- mujoco_torch/_src/io.py / device.py ---------------------------------------------------------
def device_put(nv=3):
    g = torch.Generator().manual_seed(0)
    cinert = torch.rand(nv, 10, generator=g, dtype=torch.float64)
    cinert[:, 9] += 1.0
    cdof = torch.zeros(nv, 6, dtype=torch.float64)
    cdof[:, 2] = 1.0
    cdof[:, 3] = torch.rand(nv, generator=g, dtype=torch.float64)
    result = Model(nu=nv, na=0, nv=nv, opt=Option(), jnt_type=(JointType.HINGE,) * nv,
                 qpos0=torch.zeros(nv, dtype=torch.float64),
                 dof_damping=torch.full((nv,), 0.1, dtype=torch.float64),
                 dof_armature=torch.full((nv,), 0.01, dtype=torch.float64), body_cinert=cinert, body_cdof=cdof,
                 actuator_ctrllimited_bool=torch.tensor([[True, True], [False, False], [True, True]][:nv]),
                 actuator_ctrlrange=torch.tensor([[-1.0, 1.0]] * nv, dtype=torch.float64),
                 actuator_gear=torch.full((nv,), 2.0, dtype=torch.float64))
    return result


def make_data(m: Model) -> Data:
    z = lambda *s: torch.zeros(s, dtype=torch.float64)
    return Data(time=z(), qpos=z(m.nv), qvel=z(m.nv), act=z(m.na), ctrl=z(m.nu), qfrc_bias=z(m.nv),
                qfrc_actuator=z(m.nv), qfrc_smooth=z(m.nv), qacc=z(m.nv))


# test/compile_recompile_integration_test.py: compile(vmap(step), fullgraph=True), 3 successive calls
BATCH = 4
NSTEPS = 3
torch.set_default_dtype(torch.float64)
with torch.device("cpu"):
    mx = device_put()
    dx = make_data(mx)
dx = pytree.tree_map(lambda t: t.expand(BATCH, *t.shape).clone(), dx)
dx.ctrl = torch.linspace(-2.0, 2.0, BATCH * mx.nu).reshape(BATCH, mx.nu)
dx.qvel = torch.linspace(-0.5, 0.5, BATCH * mx.nv).reshape(BATCH, mx.nv)
compiled = torch.compile(torch.vmap(step, in_dims=(None, 0)))  # fullgraph=True dropped: the probe's eager reference refuses it
checksum = 0.0
for _ in range(NSTEPS):
    dx = compiled(mx, dx)
    checksum += dx.qpos.sum().item() + dx.qvel.sum().item()
print(f"OUT {checksum:.4f}")
