// Memory region table and access checker.
//
// Each entry: valid, 8-bit tag, protection domain, base address, length, access rights. A key
// is (index << 8) | tag, so a key kept after its region was deregistered and the slot reused
// (with a new tag) no longer matches. The check port validates one access per cycle, fully
// pipelined, in this order (the first failure is reported):
//   1 bad key   index out of range, entry invalid, or tag mismatch
//   2 PD        protection domain differs
//   3 access    the access needs a right the region does not grant (local read always allowed)
//   4 bounds    [addr, addr+len) not inside [base, base+length) (64-bit overflow is a failure)
// This is the rule of model::transport::mem::MrTable::check; callers skip the check for
// zero-length remote accesses as IBTA allows. A check issued in the same cycle as a write to
// its entry sees the entry as it was before the write.
module hm_mr_table
  import hm_pkg::*;
  import hm_desc_pkg::*;
#(
  // Number of entries (power of two).
  parameter int NUM_MRS = 4096,
  // Width of the check request ID returned with the result.
  parameter int ID_WIDTH = 8,
  // Index bits (derived).
  localparam int IW = $clog2(NUM_MRS),
  // The invalidate bits are read in two steps, a group of 2^GB in C1 and the bit in C2
  // (derived: 64 groups of 64 at 4096 entries).
  localparam int GB = IW / 2
) (
  input  logic                clk,
  input  logic                rst,

  // Table writes (from the control bus): entry s_wr_index becomes s_wr (valid 0 clears it)
  input  logic [IW-1:0]       s_wr_index,
  input  hm_mr_ctx_t          s_wr,
  input  logic                s_wr_valid,
  output logic                s_wr_ready,

  // Checks
  // (need HM_MRN_INVALIDATE: key and PD checked, on success the entry stops matching until
  // rewritten)
  input  hm_mr_chk_t          s_chk,
  input  logic [ID_WIDTH-1:0] s_chk_id,
  input  logic                s_chk_valid,
  output logic                s_chk_ready,

  // Results, in request order
  // (ok; the region's base, for address translation, and its end, saturated, for checkers
  // that cache the region)
  output hm_mr_res_t          m_res,
  output logic [2:0]          m_res_err,     // HM_MRE_*
  output logic [ID_WIDTH-1:0] m_res_id,
  output logic                m_res_valid,
  input  logic                m_res_ready,

  // Pulses when an entry changes (a write or an invalidation): cached verdicts are stale
  output logic                m_changed
);
  hm_mr_ctx_t mem [NUM_MRS];
  // invalidated by a SEND with invalidate (flip-flops: set by a verdict and cleared by a
  // write in the same cycle, which one block RAM port pair cannot do beside the read), as
  // groups of 2^GB bits so that no read multiplexer is 2^IW to 1 in one stage
  logic [(1 << (IW - GB))-1:0][(1 << GB)-1:0] inval_q;

  // Writes: one per cycle, never blocked
  assign s_wr_ready = 1'b1;
  always_ff @(posedge clk) begin
    if (s_wr_valid) mem[s_wr_index] <= s_wr;
  end
  logic          inv_set;
  logic [IW-1:0] inv_idx;
  always_ff @(posedge clk) begin
    if (rst) inval_q <= '0;
    else begin
      if (inv_set) inval_q[inv_idx[IW-1:GB]][inv_idx[GB-1:0]] <= 1'b1;
      if (s_wr_valid) inval_q[s_wr_index[IW-1:GB]][s_wr_index[GB-1:0]] <= 1'b0;
    end
  end

  // Checks: a pipeline that advances as a whole when the output skid has room
  logic adv;
  assign s_chk_ready = adv;

  // C1: registered request, table read, the entry's group of invalidate bits
  logic                c1_v;
  hm_mr_chk_t          c1;
  logic [ID_WIDTH-1:0] c1_id;
  hm_mr_ctx_t          c1_e;
  logic [(1 << GB)-1:0] c1_inval_g;
  always_ff @(posedge clk) begin
    if (adv) begin
      c1         <= s_chk;
      c1_id      <= s_chk_id;
      c1_e       <= mem[s_chk.key[8 +: IW]];
      c1_inval_g <= inval_q[s_chk.key[8 + GB +: IW - GB]];
    end
    if (rst) c1_v <= 1'b0;
    else if (adv) c1_v <= s_chk_valid;
  end

  // C2: key/PD/access verdicts; the two sums for the bounds check
  logic                c2_v, c2_badkey, c2_pd, c2_acc;
  logic [64:0]         c2_end, c2_lim;
  logic [63:0]         c2_addr, c2_base;
  logic [ID_WIDTH-1:0] c2_id;
  logic                c2_inv;
  logic [IW-1:0]       c2_idx;
  always_ff @(posedge clk) begin
    if (adv) begin
      logic ok;
      c2_badkey <= !c1_e.valid || c1_inval_g[c1.key[8 +: GB]] || c1_e.tag != c1.key[7:0] ||
                   (IW < 24 && (c1.key[31:8] >> IW) != '0);
      c2_pd     <= c1_e.pd != c1.pd;
      case (c1.need)
        HM_MRN_LOCAL_READ:    ok = 1'b1;
        HM_MRN_LOCAL_WRITE:   ok = (c1_e.access & HM_MRA_LOCAL_WRITE) != '0;
        HM_MRN_REMOTE_READ:   ok = (c1_e.access & HM_MRA_REMOTE_READ) != '0;
        HM_MRN_REMOTE_WRITE:  ok = (c1_e.access & HM_MRA_REMOTE_WRITE) != '0;
        HM_MRN_REMOTE_ATOMIC: ok = (c1_e.access & HM_MRA_REMOTE_ATOMIC) != '0;
        HM_MRN_INVALIDATE:    ok = 1'b1;
        default: ok = 1'b0;
      endcase
      c2_acc  <= !ok;
      c2_end  <= {1'b0, c1.addr} + {1'b0, c1.len};
      c2_lim  <= {1'b0, c1_e.base} + {1'b0, c1_e.len};
      c2_addr <= c1.addr;
      c2_base <= c1_e.base;
      c2_id   <= c1_id;
      c2_inv  <= c1.need == HM_MRN_INVALIDATE;
      c2_idx  <= c1.key[8 +: IW];
    end
    if (rst) c2_v <= 1'b0;
    else if (adv) c2_v <= c1_v;
  end

  // C3: bounds, priority; into the output skid
  logic [2:0] err;
  always_comb begin
    logic oob;
    // end must not overflow 64 bits; the region's end saturates at 2^64 - 1
    oob = !c2_inv && (c2_end[64] || c2_addr < c2_base ||
          c2_end[63:0] > (c2_lim[64] ? 64'hFFFF_FFFF_FFFF_FFFF : c2_lim[63:0]));
    if (c2_badkey)  err = HM_MRE_BAD_KEY;
    else if (c2_pd) err = HM_MRE_PD;
    else if (c2_acc) err = HM_MRE_ACCESS;
    else if (oob)   err = HM_MRE_BOUNDS;
    else            err = HM_MRE_OK;
  end

  // an invalidation takes effect when its (successful) verdict leaves the pipeline
  assign inv_set = c2_v && adv && c2_inv && err == HM_MRE_OK;
  assign inv_idx = c2_idx;

  logic [63:0] c2_end_sat;
  assign c2_end_sat = c2_lim[64] ? 64'hFFFF_FFFF_FFFF_FFFF : c2_lim[63:0];
  always_ff @(posedge clk) m_changed <= !rst && (s_wr_valid || inv_set);

  localparam int OW = $bits(hm_mr_res_t) + 3 + ID_WIDTH;
  logic [OW-1:0] o_pack, m_pack;
  assign o_pack = {err == HM_MRE_OK, c2_base, c2_end_sat, err, c2_id};
  hm_skid #(.WIDTH(OW)) u_out (
    .clk, .rst,
    .s_data(o_pack), .s_valid(c2_v), .s_ready(adv),
    .m_data(m_pack), .m_valid(m_res_valid), .m_ready(m_res_ready)
  );
  assign {m_res, m_res_err, m_res_id} = m_pack;

  logic unused_ok;
  assign unused_ok = ^{c1.key};

  if ((1 << IW) != NUM_MRS || IW > 24 || IW < 2) begin : g_bad_size
    $error("hm_mr_table: NUM_MRS must be a power of two from 4 to 2^24");
  end
endmodule
