"""FlyDSL topk for gfx950 (MI355X, wave64) and gfx1250 (MI450, wave32).

Math (``xvendor.topk`` / torch.topk over the last dim): the k largest (``largest=False``:
smallest) entries of each row and their int64 indices, always sorted (valid for
``sorted=False`` too). Order: NaN above +inf (as torch), and equal values by lowest index
first, the rule stated by ``xvendor.topk``: every entry is ranked by the composite
(key, -index), which is unique, so the result is one well-defined list.

NOTE [order keys]: a value v (bf16/fp16 widened exactly to fp32) becomes the int32
``key = b ^ ((b >> 31) & 0x7fffffff)`` of its bits b (NaNs first made one canonical NaN):
signed int order is then float order (-0 just below +0). ``largest=False`` uses ``~key``
(order reversed). Keys decode back to the value exactly (the map is an involution), so no
kernel re-reads x to write the values. ``order_key``/``decode_key`` below are the same
functions, run on ints by the tests and on FlyDSL values by the kernels.

Two forms (``TopkConfig.form``; ``configs.topk_for`` picks one per call):
- ``router`` (tokens x experts, experts up to ``vec * wave`` = 256, k up to the wave
  size): one wave per row; each lane holds ``vec`` + 1 candidates in registers (one
  vector load, one tail element, NOTE [row masking] in ``rmsnorm``). k rounds, each a
  wave-wide arg-max over the candidates ranked below the previous winner (lane shuffles
  only: no LDS, no barrier); lane r keeps the r-th winner and lanes < k store together.
  O(k * (vec + log2 wave)) per row.
- ``radix`` (sampling rows of 32k-256k, k up to ``k_max``): one workgroup per row. Radix
  select on the key, 8 bits per pass (4 passes): each pass counts, in an LDS histogram
  (``ds_add``), the digits of the entries whose higher digits match the prefix found so
  far, then every thread scans the 256 buckets to find the digit where the k-th entry
  lies. Ties on the k-th key (more equal keys than places left) take up to 3 more passes
  on the index bits (rows under 2**24), selecting the lowest indices: only when the count
  says so. A last pass gathers the exactly-k selected (key, index) pairs into LDS through
  an atomic counter, and each thread ranks its entries against the k in LDS to write them
  in order. Row work: 4-8 passes of n reads (the row is the workgroup's own: after the
  first pass it is read from cache) plus k^2 LDS compares: linear in n, never n^2 or n*k.
  Known limit: one workgroup per row, so a batch of fewer rows than CUs leaves CUs idle
  (64 rows of 256k on 256 CUs); splitting a row across workgroups (per-workgroup
  histograms merged in a second step) is the next form to add, once timing can choose.

NOTE [unverified numerics]: compiled to real gfx950/gfx1250 code objects on a CPU
(``xvendor.rocm.crosscompile``, templates ``topk:router`` / ``topk:radix``;
tests/rocm/test_topk.py); never run. The selection logic (keys, radix passes, tie
rule, rank) is checked on the CPU by running this module's index and key functions with
torch (``reference_select``) against torch.topk, but the kernels' numerics are unverified
until they run on the hardware; the correctness gate checks each specialization there.
"""

from __future__ import annotations

import torch

from . import launch as _launch
from . import rmsnorm as _rows

WAVE = _rows.WAVE
ARGS = ("X", "V", "I", "rows", "n", "k", "grid")
RADIX_BITS, KEY_PASSES, INDEX_PASSES = 8, 4, 3  # index passes: rows under 2**24
MAX_N = 1 << (RADIX_BITS * INDEX_PASSES)
_CANON_NAN = 0x7FC00000
_INT32 = 1 << 32


# -- keys: the kernels call these on FlyDSL Int32 values, the tests on ints ----------------

def order_key(bits, largest: bool):
    """int32 order key of fp32 ``bits`` (an int32, NaNs canonical): NOTE [order keys]."""
    key = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    return key if largest else ~key


def decode_key(key, largest: bool):
    """The fp32 bits of ``key`` (``order_key``'s inverse)."""
    k = key if largest else ~key
    return k ^ ((k >> 31) & 0x7FFFFFFF)


def digit(key, shift: int):
    """The radix digit of ``key`` at ``shift`` in unsigned order (the top digit's sign bit
    flipped, so digit order is signed key order)."""
    d = (key >> shift) & 0xFF
    return d ^ 0x80 if shift == 32 - RADIX_BITS else d


def raw_digit(d, shift: int):
    """``digit``'s inverse: the key bits of digit ``d`` at ``shift``."""
    return d ^ 0x80 if shift == 32 - RADIX_BITS else d


def prefix_mask(p: int) -> int:
    """The key bits fixed before key pass ``p`` (the top ``8 p`` bits), as an int32."""
    m = ((1 << (RADIX_BITS * p)) - 1) << (32 - RADIX_BITS * p)
    return m - _INT32 if m >= 1 << 31 else m


def index_mask(p: int) -> int:
    """The index bits fixed before index pass ``p``."""
    return ((1 << (RADIX_BITS * p)) - 1) << (RADIX_BITS * (INDEX_PASSES - p))


def reference_select(x: torch.Tensor, k: int, largest: bool = True):
    """The radix kernel's algorithm, pass by pass, on the CPU with torch (int64 keys):
    returns (values, indices) of each row of a 2-D ``x``. Not a reference for numerics: a
    twin of the kernel's logic, built from the same key, digit and mask functions, so the
    tests can compare that logic with torch.topk on ties, NaNs, signed zeros and k = n."""
    bits = x.float().view(torch.int32).to(torch.int64)
    bits = torch.where(torch.isnan(x.float()), _CANON_NAN, bits)
    keys = order_key(bits, largest)
    idx = torch.arange(x.shape[1])
    out_v, out_i = [], []
    for row in range(x.shape[0]):
        key = keys[row]
        prefix, kk, cnt = 0, k, 0
        for p in range(KEY_PASSES):
            shift = 32 - RADIX_BITS * (p + 1)
            live = (key & prefix_mask(p)) == prefix
            hist = torch.bincount(digit(key[live], shift), minlength=256)
            d, before, cnt = _scan(hist.tolist(), kk, descending=True)
            kk -= before
            prefix = _s32(prefix | raw_digit(d, shift) << shift)
        limit = x.shape[1]
        if cnt > kk:  # more equal keys than places: lowest indices first
            iprefix = 0
            for p in range(INDEX_PASSES):
                shift = RADIX_BITS * (INDEX_PASSES - 1 - p)
                live = (key == prefix) & ((idx & index_mask(p)) == iprefix)
                hist = torch.bincount((idx[live] >> shift) & 0xFF, minlength=256)
                d, before, _ = _scan(hist.tolist(), kk, descending=False)
                kk -= before
                iprefix |= d << shift
            limit = iprefix
        sel = (key > prefix) | ((key == prefix) & (idx <= limit))
        sk, si = key[sel], idx[sel]
        # rank: entries above it (larger key, or equal key and lower index)
        rank = ((sk[None, :] > sk[:, None]) | ((sk[None, :] == sk[:, None]) &
                                                (si[None, :] < si[:, None]))).sum(1)
        order = torch.argsort(rank)
        vbits = decode_key(sk[order], largest)
        vbits = torch.where(vbits >= 1 << 31, vbits - _INT32, vbits).to(torch.int32)
        out_v.append(vbits.view(torch.float32).to(x.dtype))
        out_i.append(si[order])
    return torch.stack(out_v), torch.stack(out_i)


def _s32(v: int) -> int:
    """``v`` as the kernel's int32 holds it (two's complement wrap)."""
    v &= _INT32 - 1
    return v - _INT32 if v >= 1 << 31 else v


def _scan(hist, kk, descending):
    """(digit, entries before it, entries in it) of the bucket holding the kk-th entry,
    walking the buckets from the top (descending) or the bottom: the kernels' scan."""
    cum, found = 0, (0, 0, 0)
    for j in range(256):
        d = 255 - j if descending else j
        h = hist[d]
        if cum < kk <= cum + h:
            found = (d, cum, h)
        cum += h
    return found


# -- host side -------------------------------------------------------------------------

def radix_lds_bytes(arch: str, cfg) -> int:
    """Histogram (padded to the thread count), k_max keys and indices, the counter."""
    threads = cfg.waves * WAVE[arch]
    return 4 * (max(256, threads) + 2 * cfg.k_max + 4)


def lds_bytes(arch: str, cfg) -> int:
    return radix_lds_bytes(arch, cfg) if cfg.form == "radix" else 0


def specialization(args: tuple, cfg, arch: str) -> tuple[str, dict]:
    """(template, build() keywords) of a call ``(x, k, dim, largest, sorted)``.

    Raises ValueError (the registry falls back to aten) for what the kernels do not do."""
    x, k, dim, largest = (tuple(args) + (-1, True))[:4]
    if x.dtype not in _rows._DT:
        raise ValueError(f"xvendor flydsl topk: x dtype {x.dtype} is not bf16, fp16 or fp32")
    n = x.shape[dim] if x.dim() else 1
    wave = WAVE[arch]
    if cfg.form == "router" and (n > cfg.vec * wave or k > wave):
        raise ValueError(f"xvendor flydsl topk: the router form on {arch} takes rows of up "
                         f"to {cfg.vec * wave} elements and k <= {wave} (got n={n}, k={k})")
    if cfg.form == "radix" and (k > cfg.k_max or n >= MAX_N):
        raise ValueError(f"xvendor flydsl topk: the radix form takes k <= {cfg.k_max} and "
                         f"rows under {MAX_N} elements (got k={k}, n={n})")
    return f"topk:{cfg.form}", {"dtype": _rows._DT[x.dtype], "largest": bool(largest),
                                "ragged": n % cfg.vec != 0}


def plan(x, k, dim, largest, cfg, arch: str) -> _launch.Launch:
    """The launch of one call: rows of x along ``dim`` (moved last and made contiguous:
    a copy unless dim is already the last, contiguous dim)."""
    template, spec = specialization((x, k, dim, largest), cfg, arch)
    xm = x.movedim(dim, -1)
    n = xm.shape[-1]
    rows = xm.numel() // n if n else 0
    x2 = xm.reshape(rows, n)
    if not x2.is_contiguous() or x2.data_ptr() % 16:
        x2 = x2.contiguous()  # vector loads need contiguous, 16-byte aligned rows
    v = torch.empty((rows, k), dtype=x.dtype, device=x.device)
    i = torch.empty((rows, k), dtype=torch.int64, device=x.device)
    per_wg = cfg.waves if cfg.form == "router" else 1
    args = (x2, v, i, rows, n, k, max(-(-rows // per_wg), 1))

    def result():
        shape = xm.shape[:-1] + (k,)
        return v.view(shape).movedim(-1, dim), i.view(shape).movedim(-1, dim)
    return _launch.Launch(template, spec, args, result)


# -- the kernels -----------------------------------------------------------------------

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1


def build(cfg, *, arch: str, dtype: str, largest: bool, ragged: bool = False):
    """The ``@flyc.jit`` launcher of one specialization: (launch, LDS bytes, threads).

    ``ragged`` is part of the key only (it splits the gate's verdicts, as in rmsnorm)."""
    if arch not in WAVE:
        raise KeyError(f"FlyDSL topk targets {sorted(WAVE)}, not {arch!r}")
    return (_build_router if cfg.form == "router" else _build_radix)(cfg, arch, dtype, largest)


def _keys(fx, largest):
    """key_of(fp32 value) -> int32 order key; value_of(key) -> fp32 (NOTE [order keys])."""
    def key_of(v):
        bits = (v != v).select(fx.Int32(_CANON_NAN), v.bitcast(fx.Int32))
        return order_key(bits, largest)

    def value_of(key):
        return decode_key(key, largest).bitcast(fx.Float32)
    return key_of, value_of


def _out_views(fx, V, I, row, rows, k, width):
    """Row ``row`` of the (rows, k) outputs, bounded to k entries (0 past ``rows``)."""
    kn = (row < rows).select(k, fx.Int32(0))
    views = []
    for t, nbytes in ((V, V.element_type.width // 8), (I, 8)):
        v = fx.make_view(fx.add_offset(fx.get_iter(t), row * k), fx.make_layout(width, 1))
        views.append(fx.rocdl.make_buffer_tensor(v, num_records_bytes=fx.Int64(kn) * nbytes))
    return views


def _better(fx, ka, ia, kb, ib):
    """Whether (ka, ia) ranks above (kb, ib): larger key, or equal key and lower index."""
    return (ka > kb) | ((ka == kb) & (ia < ib))


def _build_router(cfg, arch, dtype, largest):
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr import gpu, range_constexpr

    wave = WAVE[arch]
    VEC, R, threads = cfg.vec, cfg.waves, cfg.waves * wave
    k_ = _rows.RowKernel(fx, cfg, arch, dtype, dtype, False, wave, 0)
    idx_row, _, idx_tail, idx_bounds, _ = k_.idx
    key_of, value_of = _keys(fx, largest)
    Int32, F32 = fx.Int32, fx.Float32

    @flyc.kernel
    def kernel(X: fx.Tensor, V: fx.Tensor, I: fx.Tensor, rows: fx.Int32, n: fx.Int32,
               k: fx.Int32):
        tid = fx.thread_idx.x
        bid = fx.block_idx.x
        atom = k_.atoms()[0]
        row, lane = idx_row(bid, tid, R, wave)
        nvec, nn = idx_bounds(row, rows, n, VEC)
        xv, xs = k_.row_views(X, row, n, nvec, nn, k_.T, k_.x_piece, 1)
        vals = k_.load(atom, xv, lane, k_.T, k_.x_piece)  # one chunk: vector ``lane``
        keys, idxs = [], []
        for i in range_constexpr(VEC):
            e = lane * VEC + i
            keys.append((e < nvec).select(key_of(vals[i]), Int32(INT_MIN)))
            idxs.append(e)
        t = idx_tail(n, lane, VEC)
        keys.append((t < nn).select(key_of(xs[t].to(F32)), Int32(INT_MIN)))
        idxs.append(t)

        pk = Int32(INT_MAX)  # the previous round's winner: every candidate ranks below it
        pi = Int32(-1)
        mk = Int32(INT_MIN)  # lane r keeps round r's winner
        mi = Int32(0)
        for r in range(k):
            bk = Int32(INT_MIN)
            bi = Int32(INT_MAX)
            for j in range_constexpr(VEC + 1):
                ok = _better(fx, pk, pi, keys[j], idxs[j]) & \
                    _better(fx, keys[j], idxs[j], bk, bi)
                bk = ok.select(keys[j], bk)
                bi = ok.select(idxs[j], bi)
            for s in range_constexpr(wave.bit_length() - 1):
                ok_k = gpu.shuffle_xor(bk, wave >> (s + 1), wave)
                ok_i = gpu.shuffle_xor(bi, wave >> (s + 1), wave)
                take = _better(fx, ok_k, ok_i, bk, bi)
                bk = take.select(ok_k, bk)
                bi = take.select(ok_i, bi)
            mine = lane == r
            mk = mine.select(bk, mk)
            mi = mine.select(bi, mi)
            pk = bk
            pi = bi
        vo, io = _out_views(fx, V, I, row, rows, k, wave)
        vo[lane] = value_of(mk).to(k_.T)  # lanes >= k: past the bound, dropped
        io[lane] = mi.to(fx.Int64)

    @flyc.jit
    def launch(X: fx.Tensor, V: fx.Tensor, I: fx.Tensor, rows: fx.Int32, n: fx.Int32,
               k: fx.Int32, grid: fx.Int32, stream: fx.Stream = fx.Stream(None)):
        kernel(X, V, I, rows, n, k).launch(grid=(grid, 1, 1), block=(threads, 1, 1), smem=0,
                                           stream=stream)

    return launch, 0, threads


def _build_radix(cfg, arch, dtype, largest):
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr import gpu, range_constexpr

    wave = WAVE[arch]
    VEC, threads = cfg.vec, cfg.waves * wave
    smem = radix_lds_bytes(arch, cfg)
    k_ = _rows.RowKernel(fx, cfg, arch, dtype, dtype, False, threads, 0)
    _, idx_chunk, idx_tail, idx_bounds, idx_chunks = k_.idx
    key_of, value_of = _keys(fx, largest)
    Int32, F32 = fx.Int32, fx.Float32
    HIST = max(256, threads)  # LDS words: histogram, keys, indices, counter
    KEYS, IDXS, COUNT = HIST, HIST + cfg.k_max, HIST + 2 * cfg.k_max
    key_shifts = [32 - RADIX_BITS * (p + 1) for p in range(KEY_PASSES)]
    idx_shifts = [RADIX_BITS * (INDEX_PASSES - 1 - p) for p in range(INDEX_PASSES)]

    def elements(vals, v, nvec):
        """(index, key, in range) of the ``VEC`` elements of vector ``v``."""
        out = []
        for i in range_constexpr(VEC):
            e = v * VEC + i
            out.append((e, key_of(vals[i]), e < nvec))
        return out

    @flyc.kernel
    def kernel(X: fx.Tensor, V: fx.Tensor, I: fx.Tensor, rows: fx.Int32, n: fx.Int32,
               k: fx.Int32):
        tid = fx.thread_idx.x
        row = fx.block_idx.x
        atom = k_.atoms()[0]
        nvec, nn = idx_bounds(row, rows, n, VEC)
        chunks = idx_chunks(n, VEC, threads)
        xv, xs = k_.row_views(X, row, n, nvec, nn, k_.T, k_.x_piece, chunks)
        t = idx_tail(n, tid, VEC)
        tkey = key_of(xs[t].to(F32))  # the tail element (in range iff tid < n % VEC)
        tin = t < nn
        sbase = fx.recast_iter(fx.PointerType.get(Int32.ir_type, fx.AddressSpace.Shared, 16),
                               fx.get_dyn_shared())
        lds = fx.make_view(sbase, fx.make_layout(COUNT + 4, 1))

        # key passes: the digit of the k-th entry, top digit first
        prefix = Int32(0)
        kk = k
        cnt = Int32(0)
        for p in range_constexpr(KEY_PASSES):
            shift = key_shifts[p]
            mask = Int32(prefix_mask(p))
            lds[tid] = Int32(0)
            for j in range_constexpr(1, HIST // threads):
                lds[j * threads + tid] = Int32(0)
            gpu.barrier()
            for c in range(chunks):
                v = idx_chunk(c, tid, threads)
                for e, key, ok in elements(k_.load(atom, xv, v, k_.T, k_.x_piece), v, nvec):
                    if ok & ((key & mask) == prefix):
                        fx.atomic_add(fx.add_offset(sbase, digit(key, shift)), Int32(1))
            if tin & ((tkey & mask) == prefix):
                fx.atomic_add(fx.add_offset(sbase, digit(tkey, shift)), Int32(1))
            gpu.barrier()
            cum = Int32(0)
            found = Int32(0)
            before = Int32(0)
            for j in range(256):  # every thread scans (broadcast reads): no extra barrier
                d = 255 - j
                h = lds[d]
                hit = (cum < kk) & (cum + h >= kk)
                found = hit.select(d, found)
                before = hit.select(cum, before)
                cnt = hit.select(h, cnt)
                cum = cum + h
            kk = kk - before
            prefix = prefix | (raw_digit(found, shift) << shift)
            gpu.barrier()

        # more equal keys than places left: the lowest indices, by radix select on them
        limit = n
        if cnt > kk:
            iprefix = Int32(0)
            for p in range_constexpr(INDEX_PASSES):
                shift = idx_shifts[p]
                imask = Int32(index_mask(p))
                lds[tid] = Int32(0)
                for j in range_constexpr(1, HIST // threads):
                    lds[j * threads + tid] = Int32(0)
                gpu.barrier()
                for c in range(chunks):
                    v = idx_chunk(c, tid, threads)
                    for e, key, ok in elements(k_.load(atom, xv, v, k_.T, k_.x_piece), v,
                                               nvec):
                        if ok & (key == prefix) & ((e & imask) == iprefix):
                            fx.atomic_add(fx.add_offset(sbase, (e >> shift) & 0xFF), Int32(1))
                if tin & (tkey == prefix) & ((t & imask) == iprefix):
                    fx.atomic_add(fx.add_offset(sbase, (t >> shift) & 0xFF), Int32(1))
                gpu.barrier()
                cum = Int32(0)
                found = Int32(0)
                before = Int32(0)
                for j in range(256):
                    h = lds[j]
                    hit = (cum < kk) & (cum + h >= kk)
                    found = hit.select(j, found)
                    before = hit.select(cum, before)
                    cum = cum + h
                kk = kk - before
                iprefix = iprefix | (found << shift)
                gpu.barrier()
            limit = iprefix

        # gather exactly k entries into LDS (any order), then rank them
        lds[COUNT] = Int32(0)  # every thread stores the same 0
        gpu.barrier()
        cptr = fx.add_offset(sbase, COUNT)
        for c in range(chunks):
            v = idx_chunk(c, tid, threads)
            for e, key, ok in elements(k_.load(atom, xv, v, k_.T, k_.x_piece), v, nvec):
                if ok & ((key > prefix) | ((key == prefix) & (e <= limit))):
                    slot = fx.atomic_add(cptr, Int32(1))
                    lds[KEYS + slot] = key
                    lds[IDXS + slot] = e
        if tin & ((tkey > prefix) | ((tkey == prefix) & (t <= limit))):
            slot = fx.atomic_add(cptr, Int32(1))
            lds[KEYS + slot] = tkey
            lds[IDXS + slot] = t
        gpu.barrier()
        vo, io = _out_views(fx, V, I, row, rows, k, cfg.k_max + 1)
        for j in range((k + threads - 1) // threads):
            s = j * threads + tid
            live = s < k
            mk = lds[KEYS + live.select(s, Int32(0))]
            mi = lds[IDXS + live.select(s, Int32(0))]
            rank = Int32(0)
            for m in range(k):
                rank = rank + _better(fx, lds[KEYS + m], lds[IDXS + m], mk, mi).select(
                    Int32(1), Int32(0))
            rank = live.select(rank, k)  # past the bound: dropped
            vo[rank] = value_of(mk).to(k_.T)
            io[rank] = mi.to(fx.Int64)

    @flyc.jit
    def launch(X: fx.Tensor, V: fx.Tensor, I: fx.Tensor, rows: fx.Int32, n: fx.Int32,
               k: fx.Int32, grid: fx.Int32, stream: fx.Stream = fx.Stream(None)):
        kernel(X, V, I, rows, n, k).launch(grid=(grid, 1, 1), block=(threads, 1, 1),
                                           smem=smem, stream=stream)

    return launch, smem, threads
