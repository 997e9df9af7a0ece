package org.vattn;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import org.junit.Test;

/** JUnit 4 tests of the SWIG/Java bindings against the real library. */
public class VattnTest implements VattnCConstants {

  @Test public void versionAndStatusStrings() {
    assertEquals(VATTN_VERSION_NUMBER >> 8, Vattn.version() >> 8);
    assertTrue(Vattn.versionString().startsWith("0.1."));
    assertEquals("not found", Vattn.statusString(VATTN_ERR_NOT_FOUND));
    assertEquals(32L, VATTN_FEATURE_LSE_OUTPUT);
  }

  @Test public void backends() {
    assertTrue(Backend.count() >= 1);
    Backend cpu = Backend.find("cpu");
    assertEquals("CPU", cpu.name());
    // Selection order: CUDA first when the library was built with it, CPU last.
    assertEquals(cpu, Backend.get(Backend.count() - 1));
    vattn_backend_info_t info = cpu.info();
    assertEquals(DLDeviceType.kDLCPU, info.getDevice_type());
    assertTrue(info.headSizeAt(0) > 0);
    assertArrayEquals(new long[] {2, 10, 16, 8, 128}, cpu.kvCacheShape(10, 16, 8, 128, false));
    vattn_backend_selector_t sel = new vattn_backend_selector_t();
    sel.setHead_size(64);
    sel.setDtype(VATTN_DTYPE_FLOAT32);
    sel.setDevice_type(DLDeviceType.kDLCPU);
    assertEquals(cpu, Backend.select(sel));
  }

  @Test public void errorsThrowVattnException() {
    VattnException e = assertThrows(VattnException.class, () -> Backend.find("no-such-backend"));
    assertEquals(VATTN_ERR_NOT_FOUND, e.getStatus());
    assertTrue(e.getMessage(), e.getMessage().startsWith("not found (6): "));
    // The library's message was consumed.
    assertEquals("", VattnC.vattn_last_error_message());

    e = assertThrows(VattnException.class, () -> Metadata.create(new Metadata.Desc()
        .queryStartLoc(0, 3, 2).seqLens(3, 3).blockTable(1, 0, 1).slotMapping(0, 1, 2)));
    assertEquals(VATTN_ERR_INVALID_ARGUMENT, e.getStatus());
    assertTrue(e.getMessage(), e.getMessage().contains("query_start_loc"));

    // Raw API: handle out-parameter too short, non-direct buffers.
    assertThrows(IllegalArgumentException.class, () -> VattnC.vattn_backend_find("CPU", new long[0]));
    assertThrows(IllegalArgumentException.class,
        () -> new vattn_metadata_desc_t().setSeq_lens(java.nio.IntBuffer.allocate(4)));
    // Out-of-range spec.
    e = assertThrows(VattnException.class, () -> new KvCacheSpec().headSize(0).pageSizeBytes());
    assertEquals(VATTN_ERR_INVALID_ARGUMENT, e.getStatus());
  }

  @Test public void metadataCreateAndSplit() {
    try (Metadata md = Metadata.create(new Metadata.Desc()
             .queryStartLoc(0, 1, 2, 5).seqLens(5, 6, 3)
             .blockTable(2, 0, 1, 2, 3, 4, 5).slotMapping(4, 21, 32, 33, 34)
             .blockSize(16).numCacheBlocks(8))) {
      Metadata.Split s = md.split(1, false);
      assertEquals(2, s.numDecodes);
      assertEquals(1, s.numPrefills);
      assertEquals(2, s.numDecodeTokens);
      assertEquals(3, s.numPrefillTokens);
      try (Metadata u = md.unpadded(2, 2)) {
        assertEquals(2, u.split(1, true).numDecodes);
      }
    }
  }

  @Test public void kvCacheSpecPageSize() {
    KvCacheSpec spec = new KvCacheSpec().blockSize(16).numKvHeads(8).headSize(128).dtype(VATTN_DTYPE_BFLOAT16);
    assertEquals(2L * 16 * 8 * 128 * 2, spec.pageSizeBytes());
    assertEquals(16L * 576 * 2,
        new KvCacheSpec().kind(VATTN_KV_SPEC_MLA).blockSize(16).numKvHeads(1).headSize(576)
            .dtype(VATTN_DTYPE_BFLOAT16).pageSizeBytes());
    try (KvCache c = KvCache.create(new KvCacheSpec[] {spec, spec}, new int[] {-1, 0}, 4, null)) {
      vattn_kv_cache_info_t i = c.info();
      assertEquals(4, i.getNum_blocks());
      assertEquals(2, i.getNum_layers());
      assertEquals(4 * spec.pageSizeBytes(), i.getTotal_bytes());
      assertArrayEquals(new long[] {2, 4, 16, 8, 128}, c.layer(1).shape());
    }
  }

  // ---- a small CPU forward vs a double-precision reference ----------------

  static final int H = 4, HKV = 2, D = 16, BS = 4;

  static float[] data(int n, int seed) {
    java.util.Random r = new java.util.Random(seed);
    float[] a = new float[n];
    for (int i = 0; i < n; ++i) a[i] = r.nextFloat() * 2 - 1;
    return a;
  }

  /** Causal attention of the last nq of s positions; k/v hold all s, in double. */
  static double[] reference(float[] q, int qOff, float[] k, float[] v, int nq, int s) {
    double scale = 1.0 / Math.sqrt(D);
    double[] out = new double[nq * H * D];
    for (int i = 0; i < nq; ++i) {
      int pos = s - nq + i;
      for (int h = 0; h < H; ++h) {
        int kh = h / (H / HKV);
        double[] w = new double[pos + 1];
        double m = Double.NEGATIVE_INFINITY, z = 0;
        for (int j = 0; j <= pos; ++j) {
          double dot = 0;
          for (int x = 0; x < D; ++x) dot += (double) q[qOff + (i * H + h) * D + x] * k[(j * HKV + kh) * D + x];
          w[j] = dot * scale;
          m = Math.max(m, w[j]);
        }
        for (int j = 0; j <= pos; ++j) { w[j] = Math.exp(w[j] - m); z += w[j]; }
        for (int x = 0; x < D; ++x) {
          double acc = 0;
          for (int j = 0; j <= pos; ++j) acc += w[j] * v[(j * HKV + kh) * D + x];
          out[(i * H + h) * D + x] = acc / z;
        }
      }
    }
    return out;
  }

  static float[] concat(float[] a, int na, float[] b, int nb) {
    float[] r = new float[na + nb];
    System.arraycopy(a, 0, r, 0, na);
    System.arraycopy(b, 0, r, na, nb);
    return r;
  }

  static double maxDiff(float[] got, int off, double[] want) {
    double m = 0;
    for (int i = 0; i < want.length; ++i) m = Math.max(m, Math.abs(got[off + i] - want[i]));
    return m;
  }

  @Test public void cpuForwardMatchesDoubleReference() {
    Backend cpu = Backend.find("CPU");
    vattn_layer_options_t lo = new vattn_layer_options_t();
    lo.setNum_heads(H);
    lo.setNum_kv_heads(HKV);
    lo.setHead_size(D);
    lo.setDtype(VATTN_DTYPE_FLOAT32);
    lo.setBlock_size(BS);
    vattn_builder_options_t bo = new vattn_builder_options_t();
    bo.setNum_heads(H);
    bo.setNum_kv_heads(HKV);
    bo.setHead_size(D);
    bo.setBlock_size(BS);
    bo.setMax_num_reqs(8);
    bo.setMax_num_tokens(64);
    bo.setMax_blocks_per_req(4);
    KvCacheSpec spec = new KvCacheSpec().blockSize(BS).numKvHeads(HKV).headSize(D).dtype(VATTN_DTYPE_FLOAT32);
    int la = 3, lb = 4; // request A: blocks [0, 1]; request B: blocks [2, 3]
    float[] ka = data((la + 1) * HKV * D, 1), va = data((la + 1) * HKV * D, 2);
    float[] kb = data((lb + 1) * HKV * D, 3), vb = data((lb + 1) * HKV * D, 4);
    try (Layer layer = new Layer(cpu, lo); Builder builder = new Builder(cpu, bo);
         Plan plan = builder.newPlan(); KvCache cache = KvCache.create(new KvCacheSpec[] {spec}, null, 8, cpu)) {
      assertEquals(VATTN_CUDAGRAPH_NEVER, builder.cudagraphSupport());
      Tensor kv = cache.layer(0);

      // Step 1: both requests prefill.
      int t = la + lb;
      float[] q = data(t * H * D, 5);
      Tensor out = Tensor.float32(t, H, D);
      try (Metadata md = Metadata.create(new Metadata.Desc().queryStartLoc(0, la, t).seqLens(la, lb)
               .blockTable(2, 0, 1, 2, 3).slotMapping(0, 1, 2, 8, 9, 10, 11).blockSize(BS).numCacheBlocks(8))) {
        builder.build(plan, 0, md, false);
        layer.forward(plan, Tensor.float32(q, t, H, D),
            Tensor.float32(concat(ka, la * HKV * D, kb, lb * HKV * D), t, HKV, D),
            Tensor.float32(concat(va, la * HKV * D, vb, lb * HKV * D), t, HKV, D), kv, out, null);
      }
      float[] o = new float[t * H * D];
      out.floats().get(o);
      double err = Math.max(maxDiff(o, 0, reference(q, 0, ka, va, la, la)),
                            maxDiff(o, la * H * D, reference(q, la * H * D, kb, vb, lb, lb)));

      // Step 2: one decode each, B first; reads the cache written in step 1.
      float[] q2 = data(2 * H * D, 6);
      float[] k2 = new float[2 * HKV * D], v2 = new float[2 * HKV * D];
      System.arraycopy(kb, lb * HKV * D, k2, 0, HKV * D);
      System.arraycopy(ka, la * HKV * D, k2, HKV * D, HKV * D);
      System.arraycopy(vb, lb * HKV * D, v2, 0, HKV * D);
      System.arraycopy(va, la * HKV * D, v2, HKV * D, HKV * D);
      Tensor out2 = Tensor.float32(2, H, D);
      Tensor lse = Tensor.float32(H, 2);
      try (Metadata md = Metadata.create(new Metadata.Desc().queryStartLoc(0, 1, 2).seqLens(lb + 1, la + 1)
               .blockTable(2, 2, 3, 0, 1).slotMapping(12, 3).blockSize(BS).numCacheBlocks(8))) {
        assertEquals(2, md.split(1, true).numDecodes);
        builder.build(plan, 0, md, false);
        layer.forward(plan, Tensor.float32(q2, 2, H, D), Tensor.float32(k2, 2, HKV, D),
            Tensor.float32(v2, 2, HKV, D), kv, out2, lse);
      }
      float[] o2 = new float[2 * H * D];
      out2.floats().get(o2);
      err = Math.max(err, maxDiff(o2, 0, reference(q2, 0, kb, vb, 1, lb + 1)));
      err = Math.max(err, maxDiff(o2, H * D, reference(q2, H * D, ka, va, 1, la + 1)));
      assertTrue("max abs error " + err, err < 1e-4);

      // The cache holds B's token 1 key at slot 9 (block 2, offset 1).
      float[] mem = kv.readFloats();
      long[] st = kv.strides();
      for (int x = 0; x < D; ++x)
        assertEquals(kb[HKV * D + x], mem[(int) (2 * st[1] + st[2] + x * st[4])], 0f);

      // Wrong output shape is refused with a message.
      VattnException e = assertThrows(VattnException.class, () -> layer.forward(plan,
          Tensor.float32(q2, 2, H, D), null, null, kv, Tensor.float32(2, 1, H * D), null));
      assertNotEquals(VATTN_OK, e.getStatus());
    }
  }

  // ---- describe, split, drafting, block copies, v0 args -------------------

  @Test public void metadataDescribeGivesArrays() {
    try (Metadata md = Metadata.create(new Metadata.Desc()
             .queryStartLoc(0, 1, 2, 5).seqLens(5, 6, 3)
             .blockTable(2, 0, 1, 2, 3, 4, 5).slotMapping(4, 21, 32, 33, 34)
             .blockSize(16).numCacheBlocks(8).logitsIndices(2, 1, 4, 0))) {
      Metadata.Desc d = md.describe();
      assertArrayEquals(new int[] {0, 1, 2, 5}, d.queryStartLoc);
      assertArrayEquals(new int[] {5, 6, 3}, d.seqLens);
      assertArrayEquals(new int[] {0, 1, 2, 3, 4, 5}, d.blockTable);
      assertEquals(2, d.blockTableCols);
      assertArrayEquals(new long[] {4, 21, 32, 33, 34}, d.slotMapping);
      assertEquals(5, d.numActualTokens);
      assertEquals(3, d.maxQueryLen);
      assertEquals(6, d.maxSeqLen);
      assertEquals(16, d.blockSize);
      assertEquals(8, d.numCacheBlocks);
      assertArrayEquals(new int[] {1, 4, 0}, d.logitsIndicesPadded);
      assertEquals(2, d.numLogitsIndices);
      assertEquals(null, d.encoderSeqLens);
      assertEquals(null, d.dcpLocalSeqLens);
      if (d.numComputedTokens != null) // seq_lens - query_lens
        assertArrayEquals(new int[] {4, 5, 0}, d.numComputedTokens);
      // Round trip.
      try (Metadata again = Metadata.create(d)) {
        Metadata.Desc e = again.describe();
        assertArrayEquals(d.queryStartLoc, e.queryStartLoc);
        assertArrayEquals(d.seqLens, e.seqLens);
        assertArrayEquals(d.blockTable, e.blockTable);
        assertArrayEquals(d.slotMapping, e.slotMapping);
        assertArrayEquals(d.logitsIndicesPadded, e.logitsIndicesPadded);
      }
      // KV-sharing fast prefill: indices 1 and 4 fall in requests 1 and 2.
      try (Metadata f = md.kvSharingFastPrefill()) {
        Metadata.Desc e = f.describe();
        assertArrayEquals(new int[] {0, 0, 1, 2}, e.queryStartLoc);
        assertEquals(2, e.numActualTokens);
      }
    }
    // The struct's own array readers, on a description built from Java.
    vattn_metadata_desc_t c = new vattn_metadata_desc_t();
    c.setNum_reqs(1);
    java.nio.IntBuffer q = Vattn.direct(new int[] {0, 7});
    c.setQuery_start_loc(q);
    assertArrayEquals(new int[] {0, 7}, c.queryStartLocArray());
    assertEquals(null, c.seqLensArray());
    java.lang.ref.Reference.reachabilityFence(q);
  }

  @Test public void splitUbatches() {
    try (Metadata md = Metadata.create(new Metadata.Desc()
             .queryStartLoc(0, 3, 8, 12).seqLens(10, 20, 30)
             .blockTable(2, 0, 1, 2, 3, 4, 5).slotMapping(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11))) {
      // Request 1 straddles token 4 and is in both slices.
      Metadata[] parts = md.splitUbatches(0, 2, 0, 4, 1, 3, 4, 12);
      try (Metadata a = parts[0]; Metadata b = parts[1]) {
        Metadata.Desc da = a.describe(), db = b.describe();
        assertArrayEquals(new int[] {0, 3, 4}, da.queryStartLoc);
        assertArrayEquals(new int[] {10, 16}, da.seqLens);
        assertArrayEquals(new long[] {0, 1, 2, 3}, da.slotMapping);
        assertArrayEquals(new int[] {0, 4, 8}, db.queryStartLoc);
        assertArrayEquals(new int[] {20, 30}, db.seqLens);
        assertArrayEquals(new int[] {2, 3, 4, 5}, db.blockTable);
        assertEquals(8, db.numActualTokens);
      }
      assertArrayEquals(new int[] {10, 20, 30}, md.describe().seqLens);
      VattnException e = assertThrows(VattnException.class, () -> md.splitUbatches(0, 2, 0));
      assertEquals(VATTN_ERR_INVALID_ARGUMENT, e.getStatus());
      assertTrue(e.getMessage(), e.getMessage().contains("slices"));
      e = assertThrows(VattnException.class, () -> md.splitUbatches(0, 1, 0, 3, 1, 1, 3, 3));
      assertEquals(VATTN_ERR_INVALID_ARGUMENT, e.getStatus());
    }
  }

  static vattn_builder_options_t builderOptions() {
    vattn_builder_options_t bo = new vattn_builder_options_t();
    bo.setNum_heads(H);
    bo.setNum_kv_heads(HKV);
    bo.setHead_size(D);
    bo.setBlock_size(BS);
    bo.setMax_num_reqs(4);
    bo.setMax_num_tokens(32);
    bo.setMax_blocks_per_req(4);
    bo.setNum_threads(1);
    return bo;
  }

  @Test public void buildForDraftingAndCapture() {
    Backend cpu = Backend.find("CPU");
    try (Builder b = new Builder(cpu, builderOptions()); Plan plan = b.newPlan();
         Metadata md = Metadata.create(new Metadata.Desc().queryStartLoc(0, 1, 2).seqLens(3, 2)
             .blockTable(1, 0, 1).slotMapping(2, 5).blockSize(BS).numCacheBlocks(8));
         Metadata big = Metadata.create(new Metadata.Desc().queryStartLoc(0, 1, 2, 3, 4, 5)
             .seqLens(1, 1, 1, 1, 1).blockTable(1, 0, 1, 2, 3, 4).slotMapping(0, 4, 8, 12, 16)
             .blockSize(BS).numCacheBlocks(8))) {
      for (int i = 0; i < 3; ++i) b.buildForDrafting(plan, md, i);
      VattnException e = assertThrows(VattnException.class, () -> b.buildForDrafting(plan, big, 0));
      assertEquals(VATTN_ERR_WORKSPACE_TOO_SMALL, e.getStatus());
      // The CPU backend never captures CUDA graphs.
      assertEquals(VATTN_CUDAGRAPH_NEVER, b.cudagraphSupport());
      e = assertThrows(VattnException.class, () -> b.buildForCudagraphCapture(plan, md));
      assertEquals(VATTN_ERR_UNSUPPORTED, e.getStatus());
      b.build(plan, 0, md, true);
    }
  }

  static final int NB = 4, BLK = BS * HKV * D; // elements of one block of K (or V)

  static float[] block(float[] cache, int kv, int b) {
    return java.util.Arrays.copyOfRange(cache, (kv * NB + b) * BLK, (kv * NB + b + 1) * BLK);
  }

  @Test public void copyAndSwapBlocks() {
    float[] a0 = data(2 * NB * BLK, 21), b0 = data(2 * NB * BLK, 22);
    Tensor ta = Tensor.float32(a0, 2, NB, BS, HKV, D), tb = Tensor.float32(b0, 2, NB, BS, HKV, D);
    Vattn.copyBlocks(new Tensor[] {ta, tb}, 0, 3, 1, 2);
    float[] a = new float[a0.length], b = new float[b0.length];
    ta.floats().get(a);
    tb.floats().get(b);
    for (int kv = 0; kv < 2; ++kv) {
      assertArrayEquals(block(a0, kv, 0), block(a, kv, 3), 0f);
      assertArrayEquals(block(a0, kv, 1), block(a, kv, 2), 0f);
      assertArrayEquals(block(a0, kv, 0), block(a, kv, 0), 0f);
      assertArrayEquals(block(b0, kv, 1), block(b, kv, 2), 0f);
    }
    assertThrows(IllegalArgumentException.class, () -> Vattn.copyBlocks(new Tensor[] {ta}, 0, 1, 2));
    VattnException e = assertThrows(VattnException.class, () -> Vattn.copyBlocks(new Tensor[] {ta}, 0, NB));
    assertEquals(VATTN_ERR_INVALID_ARGUMENT, e.getStatus());

    // swap_blocks host -> host.
    Tensor dst = Tensor.float32(2, NB, BS, HKV, D);
    Vattn.swapBlocks(tb, dst, 0, 2, 3, 1);
    float[] d = new float[b0.length];
    dst.floats().get(d);
    for (int kv = 0; kv < 2; ++kv) {
      assertArrayEquals(block(b, kv, 0), block(d, kv, 2), 0f);
      assertArrayEquals(block(b, kv, 3), block(d, kv, 1), 0f);
      assertArrayEquals(new float[BLK], block(d, kv, 0), 0f);
    }
    e = assertThrows(VattnException.class, () -> Vattn.swapBlocks(tb, Tensor.float32(2, 1, BS, HKV, D), 0, 0));
    assertNotEquals(VATTN_OK, e.getStatus());

    // Over a KvCache: layer 2 shares layer 0's memory.
    KvCacheSpec spec = new KvCacheSpec().blockSize(BS).numKvHeads(HKV).headSize(D).dtype(VATTN_DTYPE_FLOAT32);
    try (KvCache c = KvCache.create(new KvCacheSpec[] {spec, spec, spec}, new int[] {-1, -1, 0}, NB, null)) {
      for (int l = 0; l < 2; ++l) {
        Tensor t = c.layer(l);
        float[] fill = data(2 * NB * BLK, 30 + l);
        java.nio.ByteBuffer bb = java.nio.ByteBuffer.allocateDirect(fill.length * 4).order(java.nio.ByteOrder.nativeOrder());
        bb.asFloatBuffer().put(fill);
        Tensor src = Tensor.over(bb, VATTN_DTYPE_FLOAT32, t.shape(), null);
        Vattn.swapBlocks(src, t, 0, 0, 1, 1, 2, 2, 3, 3); // fill the layer (compact NHD)
      }
      float[] l0 = c.layer(0).readFloats(), l1 = c.layer(1).readFloats();
      c.copyBlocks(2, 0);
      float[] n0 = c.layer(0).readFloats(), n1 = c.layer(1).readFloats(), n2 = c.layer(2).readFloats();
      for (int kv = 0; kv < 2; ++kv) {
        assertArrayEquals(block(l0, kv, 2), block(n0, kv, 0), 0f);
        assertArrayEquals(block(l1, kv, 2), block(n1, kv, 0), 0f);
        assertArrayEquals(block(l1, kv, 3), block(n1, kv, 3), 0f);
      }
      assertArrayEquals(n0, n2, 0f);
    }
  }

  @Test public void v0SeqLenBlockTableArgs() {
    // Two decodes of an encoder-decoder model.
    vattn_v0_metadata_desc_t c = new vattn_v0_metadata_desc_t();
    java.nio.LongBuffer slots = Vattn.direct(new long[] {1, 2});
    java.nio.IntBuffer seq = Vattn.direct(new int[] {5, 3}), bt = Vattn.direct(new int[] {0, 1});
    java.nio.IntBuffer enc = Vattn.direct(new int[] {4, 2}), cross = Vattn.direct(new int[] {7, 8});
    c.setNum_seqs(2);
    c.setNum_decode_tokens(2);
    c.setSlot_mapping(slots);
    c.setSlot_mapping_len(2);
    c.setSeq_lens(seq);
    c.setBlock_tables(bt);
    c.setBlock_tables_cols(1);
    c.setMax_query_len(1);
    c.setMax_decode_seq_len(5);
    c.setMax_decode_query_len(1);
    c.setEncoder_seq_lens(enc);
    c.setNum_encoder_tokens(6);
    c.setMax_encoder_seq_len(4);
    c.setCross_block_tables(cross);
    c.setCross_block_tables_cols(1);
    try (V0Metadata md = V0Metadata.create(c)) {
      java.lang.ref.Reference.reachabilityFence(new Object[] {slots, seq, bt, enc, cross});
      V0Metadata.SeqLenBlockTableArgs x = md.seqLenBlockTableArgs(false, VATTN_ATTN_ENCODER_DECODER);
      assertArrayEquals(new int[] {4, 2}, x.seqLens);
      assertEquals(4, x.maxSeqLen);
      assertArrayEquals(new int[] {7, 8}, x.blockTable);
      assertEquals(1, x.blockTableCols);
      V0Metadata.SeqLenBlockTableArgs s = md.seqLenBlockTableArgs(false, VATTN_ATTN_DECODER);
      assertArrayEquals(new int[] {5, 3}, s.seqLens);
      assertEquals(5, s.maxSeqLen);
      assertArrayEquals(new int[] {0, 1}, s.blockTable);
      V0Metadata.SeqLenBlockTableArgs e = md.seqLenBlockTableArgs(false, VATTN_ATTN_ENCODER);
      assertArrayEquals(new int[] {4, 2}, e.seqLens);
      assertEquals(null, e.blockTable);
      assertArrayEquals(new long[] {0, 6, 2}, md.numPrefillDecodeQueryKvTokens(VATTN_ATTN_ENCODER_DECODER));
      VattnException ex = assertThrows(VattnException.class,
          () -> md.seqLenBlockTableArgs(true, VATTN_ATTN_ENCODER_ONLY));
      assertEquals(VATTN_ERR_INVALID_ARGUMENT, ex.getStatus());
      assertTrue(ex.getMessage(), ex.getMessage().contains("attn_type"));
      // describe: arrays readable while md is open.
      vattn_v0_metadata_desc_t d = md.describe();
      assertArrayEquals(new long[] {1, 2}, d.slotMappingArray());
      assertArrayEquals(new int[] {4, 2}, d.encoderSeqLensArray());
      assertArrayEquals(new int[] {7, 8}, d.crossBlockTablesArray());
      assertEquals(null, d.contextLensArray());
    }
  }

  // ---- v0 builder and CUDA-graph state -------------------------------------
  private static V0Builder v0Builder() {
    vattn_v0_builder_options_t o = new vattn_v0_builder_options_t();
    assertEquals(16, o.getBlock_size());
    o.setBlock_size(4);
    o.setNum_cache_blocks(16);
    o.setMax_blocks_per_seq(4);
    return new V0Builder(o);
  }

  /** A 6-token prompt over blocks [3, 7]. */
  private static void addPrompt(V0Builder b) {
    vattn_v0_seq_t s = new vattn_v0_seq_t();
    s.setIs_prompt(1);
    s.setToken_len(6);
    s.setSeq_len(6);
    s.setCurr_seq_len(6);
    s.setQuery_len(6);
    s.setContext_len(0);
    b.addSeq(s, 3, 7);
  }

  /** A decode at position 9 over blocks [1, 2, 5]. */
  private static void addDecode(V0Builder b) {
    vattn_v0_seq_t s = new vattn_v0_seq_t();
    s.setIs_prompt(0);
    s.setToken_len(1);
    s.setSeq_len(10);
    s.setCurr_seq_len(10);
    s.setQuery_len(1);
    s.setContext_len(9);
    b.addSeq(s, 1, 2, 5);
  }

  @Test public void v0BuilderBuildsMetadata() {
    try (V0Builder b = v0Builder()) {
      addPrompt(b);
      addDecode(b);
      try (V0Metadata md = b.build(new int[] {6, 10}, new int[] {6, 1})) {
        vattn_v0_metadata_desc_t d = md.describe();
        assertEquals(1, d.getNum_prefills());
        assertEquals(6, d.getNum_prefill_tokens());
        assertEquals(1, d.getNum_decode_tokens());
        // Prompt slots 0..6 through [3, 7]; the decode's position 9 = block 5, offset 1.
        assertArrayEquals(new long[] {12, 13, 14, 15, 28, 29, 21}, d.slotMappingArray());
        assertArrayEquals(new int[] {6, 10}, d.seqLensArray());
        assertArrayEquals(new int[] {0, 9}, d.contextLensArray());
        assertArrayEquals(new int[] {0, 6, 7}, d.queryStartLocArray());
        assertArrayEquals(new int[] {0, 6, 16}, d.seqStartLocArray());
        // Without chunked prefill a plain prompt gets no table; 0-padded rows.
        assertEquals(3, d.getBlock_tables_cols());
        assertArrayEquals(new int[] {0, 0, 0, 1, 2, 5}, d.blockTablesArray());
        assertEquals(6, d.getMax_query_len());
        assertEquals(6, d.getMax_prefill_seq_len());
        assertEquals(10, d.getMax_decode_seq_len());
        assertEquals(1, d.getMax_decode_query_len());
        assertEquals(0, d.getUse_cuda_graph());
        assertArrayEquals(new long[] {6, 6, 1}, md.numPrefillDecodeQueryKvTokens(VATTN_ATTN_DECODER));
        V0Metadata.SeqLenBlockTableArgs a = md.seqLenBlockTableArgs(true, VATTN_ATTN_DECODER);
        assertArrayEquals(new int[] {6, 10}, a.seqLens);
        assertEquals(6, a.maxSeqLen);
        assertEquals(3, a.blockTableCols);
      }
      // build reset the builder: nothing added is refused.
      VattnException e = assertThrows(VattnException.class, () -> b.build(new int[] {1}, new int[] {1}));
      assertEquals(VATTN_ERR_INVALID_ARGUMENT, e.getStatus());
      // A prompt after a decode is refused.
      addDecode(b);
      e = assertThrows(VattnException.class, () -> addPrompt(b));
      assertTrue(e.getMessage(), e.getMessage().contains("prefills come first"));
      assertThrows(IllegalArgumentException.class, () -> b.build(new int[] {10}, new int[] {1, 1}));
    }
    V0Builder closed = v0Builder();
    closed.close();
    closed.close();
    assertThrows(IllegalStateException.class, () -> addDecode(closed));
  }

  @Test public void v0CudaGraphBatchAndGraphState() {
    final long pad = VATTN_PAD_SLOT_ID;
    try (V0Builder b = v0Builder()) {
      addDecode(b);
      try (V0Metadata g = b.build(new int[] {10}, new int[] {1}, 3, 4)) {
        vattn_v0_metadata_desc_t d = g.describe();
        assertEquals(1, d.getUse_cuda_graph());
        assertEquals(4, d.getNum_decode_tokens());
        assertArrayEquals(new long[] {21, pad, pad, pad}, d.slotMappingArray());
        assertArrayEquals(new int[] {10, 1, 1, 1}, d.seqLensArray());
        assertEquals(4, d.getBlock_tables_cols());
        assertArrayEquals(new int[] {1, 2, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, d.blockTablesArray());
      }
      try (GraphState st = new GraphState(4, 4, 64)) {
        try (V0Metadata m = st.metadataForBatch(2)) {
          vattn_v0_metadata_desc_t d = m.describe();
          assertArrayEquals(new long[] {pad, pad}, d.slotMappingArray());
          assertArrayEquals(new int[] {1, 1}, d.seqLensArray());
          assertArrayEquals(new int[8], d.blockTablesArray());
          assertEquals(1, d.getUse_cuda_graph());
          assertEquals(null, d.queryStartLocArray());
          assertEquals(64, d.getMax_decode_seq_len());
        }
        // Replay a real decode batch (one sequence, 3 block columns).
        addDecode(b);
        try (V0Metadata real = b.build(new int[] {10}, new int[] {1})) {
          st.prepareReplay(real);
        }
        try (V0Metadata m = st.metadataForBatch(2)) {
          vattn_v0_metadata_desc_t d = m.describe();
          assertArrayEquals(new long[] {21, pad}, d.slotMappingArray());
          assertArrayEquals(new int[] {10, 1}, d.seqLensArray());
          assertArrayEquals(new int[] {1, 2, 5, 0, 0, 0, 0, 0}, d.blockTablesArray());
          V0Metadata.SeqLenBlockTableArgs a = m.seqLenBlockTableArgs(false, VATTN_ATTN_DECODER);
          assertArrayEquals(new int[] {10, 1}, a.seqLens);
          assertEquals(4, a.blockTableCols);
        }
        // Prefills never replay; batch sizes are bounded.
        addPrompt(b);
        addDecode(b);
        try (V0Metadata mixed = b.build(new int[] {6, 10}, new int[] {6, 1})) {
          VattnException e = assertThrows(VattnException.class, () -> st.prepareReplay(mixed));
          assertEquals(VATTN_ERR_INVALID_ARGUMENT, e.getStatus());
        }
        VattnException e = assertThrows(VattnException.class, () -> st.metadataForBatch(5));
        assertEquals(VATTN_ERR_INVALID_ARGUMENT, e.getStatus());
      }
    }
    VattnException e = assertThrows(VattnException.class, () -> new GraphState(0, 4, 64));
    assertEquals(VATTN_ERR_INVALID_ARGUMENT, e.getStatus());
  }

  /** Applies swap_states pairs to the identity order of n requests. */
  private static long[] applySwaps(int n, long[] swaps) {
    long[] o = new long[n];
    for (int i = 0; i < n; ++i) o[i] = i;
    for (int k = 0; k + 1 < swaps.length; k += 2) {
      int i = (int) swaps[k], j = (int) swaps[k + 1];
      long t = o[i];
      o[i] = o[j];
      o[j] = t;
    }
    return o;
  }

  @Test public void reorderBatchToSplitDecodesAndPrefills() {
    // [P, P, D, D] -> [2, 3, 0, 1].
    Vattn.Reorder r = Vattn.reorderBatchToSplitDecodesAndPrefills(new int[] {5, 7, 1, 1}, new int[] {0, 0, 9, 4}, 1);
    assertArrayEquals(new long[] {2, 3, 0, 1}, r.order);
    assertTrue(r.modified);
    assertTrue(r.swaps.length <= 8);
    assertArrayEquals(r.order, applySwaps(4, r.swaps));
    // E P D D E -> D D E E P.
    r = Vattn.reorderBatchToSplitDecodesAndPrefills(new int[] {3, 4, 1, 1, 2}, new int[] {5, 0, 7, 2, 1}, 1);
    assertArrayEquals(r.order, applySwaps(5, r.swaps));
    assertEquals(2, r.order[0] + r.order[1] - 3);  // decodes 2, 3 first
    assertEquals(1, r.order[4]);                   // the prefill last
    // Already ordered: nothing moves.
    r = Vattn.reorderBatchToSplitDecodesAndPrefills(new int[] {1, 3, 8}, new int[] {4, 4, 0}, 1);
    assertArrayEquals(new long[] {0, 1, 2}, r.order);
    assertEquals(0, r.swaps.length);
    assertTrue(!r.modified);
    // A new single-token prompt is a prefill, not a decode.
    r = Vattn.reorderBatchToSplitDecodesAndPrefills(new int[] {1, 1}, new int[] {0, 3}, 1);
    assertArrayEquals(new long[] {1, 0}, r.order);
    r = Vattn.reorderBatchToSplitDecodesAndPrefills(new int[0], new int[0], 1);
    assertEquals(0, r.order.length);
    assertTrue(!r.modified);
    assertThrows(IllegalArgumentException.class,
        () -> Vattn.reorderBatchToSplitDecodesAndPrefills(new int[] {1, 1}, new int[] {0}, 1));
  }

  @Test public void ubatchSlices() {
    // cu = [0, 3, 8, 12]; default split point 16 / 2 = 8.
    long[][] s = Vattn.ubatchSlices(new int[] {3, 5, 4}, 16, 4, 2, 0);
    assertArrayEquals(new long[] {0, 2, 0, 8, 2, 3, 8, 12}, s[0]);
    assertArrayEquals(new long[] {0, 2, 0, 8, 2, 4, 8, 16}, s[1]);
  }
}
