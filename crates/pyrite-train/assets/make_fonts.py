"""Remakes the vendored fonts: DejaVu Sans (Book, Bold) subset to Latin text, for plotters' ab_glyph.

plotters 0.3.7's ab_glyph text renderer places each glyph's bounding box at the pen position,
dropping the glyph's left side bearing (so "cl" in "class" touch). Each glyph here gets one
extra zero-area contour, a horizontal line from (0, yMin) to (1, yMin): it draws nothing but makes the bounding box start at
x = 0, so the glyph lands where the font designed it. Run: python3 make_fonts.py (fonttools).
"""
import subprocess

from fontTools.pens.recordingPen import DecomposingRecordingPen
from fontTools.pens.ttGlyphPen import TTGlyphPen
from fontTools.ttLib import TTFont

UNICODES = "U+0020-007E,U+00A0-00FF,U+2212,U+2013,U+2014,U+2026,U+00B7,U+03BC,U+2192"

for name in ["DejaVuSans", "DejaVuSans-Bold"]:
    out = f"{name}-subset.ttf"
    subprocess.run(
        ["pyftsubset", f"/usr/share/fonts/truetype/dejavu/{name}.ttf", f"--unicodes={UNICODES}",
         "--layout-features=", "--no-hinting", "--desubroutinize", f"--output-file={out}"],
        check=True,
    )
    font = TTFont(out)
    glyf, hmtx = font["glyf"], font["hmtx"]
    glyph_set = font.getGlyphSet()
    for g in font.getGlyphOrder():
        glyph = glyf[g]
        if glyph.numberOfContours == 0:
            continue
        rec = DecomposingRecordingPen(glyph_set)
        glyph_set[g].draw(rec)
        glyph.recalcBounds(glyf)
        if glyph.xMin <= 0:
            continue
        y = glyph.yMin
        pen = TTGlyphPen(None)
        rec.replay(pen)
        pen.moveTo((0, y))
        pen.lineTo((1, y))
        pen.closePath()
        new = pen.glyph()
        new.recalcBounds(glyf)
        glyf[g] = new
        hmtx[g] = (hmtx[g][0], new.xMin)
    font.save(out)
