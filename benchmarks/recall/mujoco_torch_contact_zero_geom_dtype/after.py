# Reproduction of vmoens/mujoco-torch AFTER a0eaa36 (Contact.zero's geom ids int64) ("[BugFix] Align Contact.zero geom-id dtype with
# make_data (int64)", part of PR #68 "Eliminate torch.compile(vmap(step)) recompiles", squash-merged as f579c3c).
# io._make_data_contact initializes contact.geom1/geom2/geom as int64, but Contact.zero() emits int32. A model
# with no contacts (cartpole) takes collision()'s `ncon_ == 0` branch on every step, which writes
# `contact=Contact.zero(...)` over the int64 init. The caller feeds the returned Data back into
# `torch.compile(torch.vmap(step, in_dims=(None, 0)), fullgraph=True)`: call 2 fails the dtype guard
# ("tensor 'contact.geom1' dtype mismatch. expected Long, actual Int") and recompiles.
# Built on the trimmed mujoco_torch of mujoco_torch_subtree_com_where_stride/after.py (the PR's other fixes
# applied, so only this cause is left), plus types.Contact (fields and `zero` verbatim, a dataclass instead of
# an MjTensorClass), io._make_data_contact / make_data's contact part and collision_driver.collision's
# no-contact branch (the `ncon` UnbatchedTensor write dropped: tensordict-only).
import dataclasses
from typing import Sequence

import torch
import torch.utils._pytree as pytree

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


mjMINVAL = 1e-15
DEFAULT_DTYPE = torch.float64


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
            self._cache[key] = t
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
    nbody: int
    body_parentid: tuple
    body_pos: torch.Tensor  # (nbody, 3)
    body_mass: torch.Tensor  # (nbody,)
    body_cinert: torch.Tensor  # (nv, 10) one moving body per dof
    body_cdof: torch.Tensor  # (nv, 6) motion subspace of each dof
    actuator_ctrllimited_bool: torch.Tensor
    actuator_ctrlrange: torch.Tensor
    actuator_gear: torch.Tensor


mjNREF = 2
mjNIMP = 5


@dataclasses.dataclass
class Contact:
    """Result of collision detection functions."""

    dist: torch.Tensor
    pos: torch.Tensor
    frame: torch.Tensor
    includemargin: torch.Tensor
    friction: torch.Tensor
    solref: torch.Tensor
    solreffriction: torch.Tensor
    solimp: torch.Tensor
    # unsupported: mu, H
    contact_dim: torch.Tensor
    geom1: torch.Tensor
    geom2: torch.Tensor
    geom: torch.Tensor
    efc_address: torch.Tensor

    @classmethod
    def zero(cls, shape=(0,), device=None) -> "Contact":
        """Returns a contact filled with zeros."""
        return Contact(
            dist=torch.zeros(shape, device=device),
            pos=torch.zeros(shape + (3,), device=device),
            frame=torch.zeros(shape + (3, 3), device=device),
            includemargin=torch.zeros(shape, device=device),
            friction=torch.zeros(shape + (5,), device=device),
            solref=torch.zeros(shape + (mjNREF,), device=device),
            solreffriction=torch.zeros(shape + (mjNREF,), device=device),
            solimp=torch.zeros(shape + (mjNIMP,), device=device),
            contact_dim=torch.zeros(shape, dtype=torch.int32, device=device),
            geom1=torch.zeros(shape, dtype=torch.int64, device=device),
            geom2=torch.zeros(shape, dtype=torch.int64, device=device),
            geom=torch.zeros(shape + (2,), dtype=torch.int64, device=device),
            efc_address=torch.zeros(shape, dtype=torch.int64, device=device),
        )


pytree.register_dataclass(Contact)


@dataclasses.dataclass
class Data:
    time: torch.Tensor
    qpos: torch.Tensor
    qvel: torch.Tensor
    xipos: torch.Tensor
    subtree_com: torch.Tensor
    act: torch.Tensor
    ctrl: torch.Tensor
    qfrc_bias: torch.Tensor
    qfrc_actuator: torch.Tensor
    qfrc_smooth: torch.Tensor
    qacc_smooth: torch.Tensor
    qacc: torch.Tensor
    contact: Contact

    def clone(self, recurse=True):
        return dataclasses.replace(self)

    def update_(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)
        return self


pytree.register_dataclass(Data)  # Data is vmapped (in_dims=0); Model is passed unbatched (in_dims=None)


# ---- mujoco_torch/_src/smooth.py -----------------------------------------------------------------
_MJMINVAL = _CachedConst(mjMINVAL)


def kinematics(m: Model, d: Data) -> Data:
    """Stand-in for smooth.kinematics: body i > 0 sits at body_pos, swung in the xy plane by its hinge."""
    ang = torch.cumsum(d.qpos, 0)
    r = m.body_pos[1:, 0]
    xipos_moving = torch.stack([r * torch.cos(ang), r * torch.sin(ang), m.body_pos[1:, 2]], dim=-1)
    xipos = torch.cat([m.body_pos[:1], xipos_moving])
    d.update_(xipos=xipos)
    return d


def com_pos(m: Model, d: Data) -> Data:
    """Maps inertias and motion dofs to global frame centered at subtree-CoM."""

    # calculate center of mass of each subtree
    def subtree_sum(carry, xipos, body_mass):
        pos, mass = xipos * body_mass, body_mass
        if carry is not None:
            subtree_pos, subtree_mass = carry
            pos, mass = pos + subtree_pos, mass + subtree_mass
        return pos, mass

    # pos, mass = scan.body_tree(m, subtree_sum, "bb", "bb", d.xipos, m.body_mass, reverse=True)
    out, child_sum = [None] * m.nbody, [None] * m.nbody
    for b in reversed(range(m.nbody)):  # leaves first: a parent's id is smaller than its children's
        out[b] = subtree_sum(child_sum[b], d.xipos[b], m.body_mass[b])
        if b > 0:
            p = m.body_parentid[b]
            child_sum[p] = out[b] if child_sum[p] is None else tuple(x + y for x, y in zip(child_sum[p], out[b]))
    pos = torch.stack([o[0] for o in out])
    mass = torch.stack([o[1] for o in out])
    cond = torch.tile(mass < mjMINVAL, (3, 1)).T
    subtree_com = torch.where(
        cond,
        d.xipos,
        torch.vmap(torch.divide)(pos, torch.maximum(mass, _MJMINVAL.get(mass.dtype, mass.device))),
    )
    # .contiguous() to match the stride of the initial Data's subtree_com
    # (contiguous from make_data + expand().clone()).  Without this, the
    # vmap(divide) + where path produces a transposed layout (stride
    # swapped on the last two dims), which trips Dynamo's per-call stride
    # guard on subsequent compile(vmap(step)) invocations.
    subtree_com = subtree_com.contiguous()

    # (inert_com / cdof_fn: cinert and cdof are model constants in this trimmed physics)
    d.update_(subtree_com=subtree_com)
    return d


# ---- mujoco_torch/_src/collision_driver.py -------------------------------------------------------
def collision(m: Model, d: Data) -> Data:
    """Collides geometries."""
    ncon_ = constraint_sizes(m)[3]

    if ncon_ == 0:
        dev = d.qpos.device
        d.update_(
            contact=Contact.zero(device=dev),
        )
        return d

    raise NotImplementedError("geom-pair collision functions are not part of this reproduction")


# ---- mujoco_torch/_src/forward.py ---------------------------------------------------------------
def _position(m: Model, d: Data) -> Data:
    """Position-dependent computations."""
    d = kinematics(m, d)
    d = com_pos(m, d)
    d = collision(m, d)
    return d


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
    qacc_smooth = qfrc_smooth / (m.body_cinert[:, 9] + m.dof_armature)
    d.update_(qfrc_smooth=qfrc_smooth, qacc_smooth=qacc_smooth)
    return d


def constraint_sizes(m: Model):
    """collision_driver.constraint_sizes stand-in: this model has no contacts, limits or equalities."""
    return 0, 0, 0, 0, 0


def forward(m: Model, d: Data) -> Data:
    """Forward dynamics."""
    d = _position(m, d)
    d = _velocity(m, d)
    d = _actuation(m, d)
    d = _acceleration(m, d)

    _, _, _, _, nefc = constraint_sizes(m)
    if nefc == 0:
        # Clone to avoid aliasing qacc with qacc_smooth — Dynamo emits a
        # "Duplicate tensors found" guard otherwise, forcing a recompile on
        # the next call when the caller feeds the aliased tensors back in.
        d.update_(qacc=d.qacc_smooth.clone())
        return d

    raise NotImplementedError("solver.solve is not part of this reproduction")


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
    body_pos = torch.cat([torch.zeros(1, 3, dtype=torch.float64), torch.rand(nv, 3, generator=g, dtype=torch.float64)])
    result = Model(nu=nv, na=0, nv=nv, opt=Option(), jnt_type=(JointType.HINGE,) * nv,
                 nbody=nv + 1, body_parentid=(0,) + tuple(range(nv)), body_pos=body_pos,
                 body_mass=torch.cat([torch.zeros(1, dtype=torch.float64), cinert[:, 9]]),
                 qpos0=torch.zeros(nv, dtype=torch.float64),
                 dof_damping=torch.full((nv,), 0.1, dtype=torch.float64),
                 dof_armature=torch.full((nv,), 0.01, dtype=torch.float64), body_cinert=cinert, body_cdof=cdof,
                 actuator_ctrllimited_bool=torch.tensor([[True, True], [False, False], [True, True]][:nv]),
                 actuator_ctrlrange=torch.tensor([[-1.0, 1.0]] * nv, dtype=torch.float64),
                 actuator_gear=torch.full((nv,), 2.0, dtype=torch.float64))
    _CachedConst.warm_all(torch.device("cpu"))

    return result


def _make_data_contact(ncon: int, contact_dim: torch.Tensor, efc_address: torch.Tensor) -> Contact:
    """Create contact for the Data object."""
    return Contact(
        dist=torch.zeros((ncon,), dtype=DEFAULT_DTYPE),
        pos=torch.zeros((ncon, 3), dtype=DEFAULT_DTYPE),
        frame=torch.zeros((ncon, 3, 3), dtype=DEFAULT_DTYPE),
        includemargin=torch.zeros((ncon,), dtype=DEFAULT_DTYPE),
        friction=torch.zeros((ncon, 5), dtype=DEFAULT_DTYPE),
        solref=torch.zeros((ncon, mjNREF), dtype=DEFAULT_DTYPE),
        solreffriction=torch.zeros((ncon, mjNREF), dtype=DEFAULT_DTYPE),
        solimp=torch.zeros((ncon, mjNIMP), dtype=DEFAULT_DTYPE),
        contact_dim=contact_dim,
        geom1=torch.full((ncon,), -1, dtype=torch.int64),
        geom2=torch.full((ncon,), -1, dtype=torch.int64),
        geom=torch.full((ncon, 2), -1, dtype=torch.int64),
        efc_address=efc_address,
    )


def make_data(m: Model) -> Data:
    # Pre-populate _CachedConst caches on the model's tensor device so that
    # the first torch.compile trace sees the cache already populated.  Without
    # this, the first trace records the cache-miss branch and the second
    # call's hit flips the ___dict_contains guard → Dynamo recompile.
    _CachedConst.warm_all(m.qpos0.device if isinstance(m.qpos0, torch.Tensor) else torch.device("cpu"))

    # Get constraint counts purely from Model (no Data needed).
    ne, nf, nl, ncon, nefc = constraint_sizes(m)
    ns = ne + nf + nl

    # Build contact dim and efc_address (mujoco_torch uses contact_dim=3 for all, 4 efc rows per contact)
    contact_dim = torch.full((ncon,), 3, dtype=torch.int32) if ncon > 0 else torch.zeros((0,), dtype=torch.int32)
    efc_address = (
        torch.arange(ns, ns + ncon * 4, 4, dtype=torch.int64) if ncon > 0 else torch.zeros((0,), dtype=torch.int64)
    )
    contact = _make_data_contact(ncon, contact_dim, efc_address)

    z = lambda *s: torch.zeros(s, dtype=torch.float64)
    return Data(time=z(), qpos=z(m.nv), qvel=z(m.nv), xipos=z(m.nv + 1, 3), subtree_com=z(m.nv + 1, 3), act=z(m.na), ctrl=z(m.nu), qfrc_bias=z(m.nv),
                qfrc_actuator=z(m.nv), qfrc_smooth=z(m.nv), qacc_smooth=z(m.nv), qacc=z(m.nv), contact=contact)


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
compiled = torch.compile(torch.vmap(step, in_dims=(None, 0)), fullgraph=True, backend=counting_backend)
checksum = 0.0
for _ in range(NSTEPS):
    dx = compiled(mx, dx)
    checksum += dx.qpos.sum().item() + dx.qvel.sum().item() + dx.qacc.sum().item() + dx.subtree_com.sum().item()
    checksum += dx.contact.geom1.shape[-1] + dx.contact.dist.sum().item()
print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
